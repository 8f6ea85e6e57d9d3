"""ScopeClassifier on the packaged data-center scope, with the real encoder and weights.

The questions here are deliberately phrased differently from the scope file's examples.
"""
from __future__ import annotations

import pytest
from meshward.contracts import OUT_OF_SCOPE, IntentResult
from meshward.embedding import get_encoder
from meshward.intent.classifier import ScopeClassifier
from meshward.intent.scope import load_scope

INTENTS = {"weather", "location", "calculation", "chart", "document", "diagnostics", "cluster_register", "cluster_info", "cluster_health", "cluster_changes", "ops_knowledge", "assistant_help"}

IN_SCOPE: list[tuple[str, str]] = [
    # weather
    ("Do I need an umbrella near the data centre today?", "weather"),
    ("how warm is it over at the DC at the moment", "weather"),
    ("What's the weather going to be like this weekend at the facility?", "weather"),
    ("Is there any wind outside the server building?", "weather"),
    ("Tell me the temperature forecast for tomorrow where our data center is", "weather"),
    ("Should we expect heavy rain at the site later?", "weather"),
    ("weather?", "weather"),
    # location
    ("Which town is the datacenter in?", "location"),
    ("what is my public IP", "location"),
    ("Can you tell me where our servers live geographically?", "location"),
    ("Find the coordinates for our data centre's IP address", "location"),
    ("In what country is this machine hosted?", "location"),
    ("Where exactly is the facility?", "location"),
    # calculation (the canonical phrasings, which the scope file lists as examples, are tested separately below)
    ("3 to the power of 5", "calculation"),
    ("what's 12.5% of 480", "calculation"),
    ("what's 19 plus 23", "calculation"),
    ("How much is 3.14 * 2 * 5?", "calculation"),
    ("what is the square root of two hundred and twenty five", "calculation"),
    ("could you work out 250 minus 75 for me", "calculation"),
    ("12 squared please", "calculation"),
    ("Multiply 48 by 12.", "calculation"),
    # chart
    ("Render a bar graph for 4, 9, 1, 6", "chart"),
    ("Can I get a line plot of CPU readings 20 35 50 45 30?", "chart"),
    ("show me a pie chart: apples 10, pears 5, plums 3", "chart"),
    ("Histogram of 2 3 3 4 4 4 5 5 6 please", "chart"),
    ("Visualize the numbers 5, 10, 20, 40 as a chart", "chart"),
    ("Draw me a graph of the following values: 8, 6, 7, 5, 3, 0, 9", "chart"),
    # document
    ("What is the attached PDF about?", "document"),
    ("Give me the gist of the file I uploaded", "document"),
    ("Pull the invoice number out of this document", "document"),
    ("Which sections in the report talk about redundancy?", "document"),
    ("What does the PDF say about the SLA?", "document"),
    # diagnostics
    ("how full is the disk", "diagnostics"),
    ("What's the current RAM utilisation on the box?", "diagnostics"),
    ("How long since the last reboot of this server?", "diagnostics"),
    ("Show me the busiest processes", "diagnostics"),
    ("what's the system load like", "diagnostics"),
    ("How many cores and how much memory does this machine have?", "diagnostics"),
    ("Is the CPU maxed out?", "diagnostics"),
    ("free -h", "diagnostics"),
    # clusters
    ("Please register cluster orion at https://10.9.9.9:6443 with token [redacted]", "cluster_register"),
    ("list our kubernetes clusters", "cluster_info"),
    ("Which Kubernetes version is orion on?", "cluster_info"),
    ("Are any pods failing in cluster orion?", "cluster_health"),
    ("is orion healthy right now?", "cluster_health"),
    # cluster_changes (from the periodic health checks stored in memory)
    ("What changed on orion over the past six hours?", "cluster_changes"),
    ("did any of our clusters change state since yesterday morning?", "cluster_changes"),
    ("Show me what happened to the clusters overnight", "cluster_changes"),
    # ops_knowledge (explanations, answered by the deep tier)
    ("What is the difference between RAID 1 and RAID 6?", "ops_knowledge"),
    ("Explain how a Kubernetes readiness probe differs from a startup probe", "ops_knowledge"),
    ("How does ARP resolve an address on a LAN?", "ops_knowledge"),
    # assistant_help
    ("What sort of things can you help me with?", "assistant_help"),
    ("hey", "assistant_help"),
    ("what did I ask you a moment ago?", "assistant_help"),
    ("Remind me what my last question was", "assistant_help"),
    ("Who am I talking to?", "assistant_help"),
    ("Could you give me a list of your features?", "assistant_help"),
    ("thank you!", "assistant_help"),
]

OUT_OF_SCOPE_QUESTIONS: list[str] = [
    "What's the capital city of Germany?",
    "Compose a haiku about autumn leaves",
    "How do I bake sourdough bread?",
    "Who won the World Cup in 2018?",
    "Should I invest in Tesla shares?",
    "My throat hurts, what antibiotics should I take?",
    "Make me a landing page for my bakery in React",
    "Suggest a comedy film to watch with my kids",
    "Translate 'where is the train station' into French",
    "Why did the Roman Empire fall?",
    "Who wrote Pride and Prejudice?",
    "Tell me a funny story about cats",
    "What is the best pizza topping?",
    "How many players are on a basketball team?",
    "Write an essay about climate change policy",
    "What's the difference between a crocodile and an alligator?",
    "Recommend a podcast about true crime",
    "How do I ask for a raise at work?",
    "What's the tallest building in the world?",
    "Where is Machu Picchu?",
    "Explain the theory of relativity",
    "Who is Taylor Swift dating?",
    "What year did the Berlin Wall come down?",
    "Plan a three-day itinerary for Paris",
    "How can I improve my chess openings?",
    "What are good exercises for back pain?",
    "Write a SQL query to find duplicate customers in my shop database",
    "What's the best laptop for gaming?",
    "Tell me about the French Revolution",
    "Is coffee bad for you?",
    # near misses: data-center words, but not something this assistant does
    "Can you reboot the server?",
    "Who invented the CPU?",
    "Tell me a joke about servers",
    "What's the plot of the movie Inception?",
    "Where is the nearest hospital?",
]

# (text, has_attachments, expected intent)
ATTACHMENT_CASES: list[tuple[str, bool, str]] = [
    ("Summarise this in two sentences", True, "document"),
    ("What are the key takeaways?", True, "document"),
    ("Extract every email address from it", True, "document"),
    ("What's 18% of 350?", True, "calculation"),
    ("Write me a poem about the sea", True, OUT_OF_SCOPE),
]


@pytest.fixture(scope="module")
def classifier() -> ScopeClassifier:
    return ScopeClassifier(load_scope(), get_encoder())


def _check_result_shape(result: IntentResult) -> None:
    assert result.scope == "datacenter"
    assert 0.0 <= result.confidence <= 1.0
    assert len(result.runner_ups) <= 3
    assert result.in_scope == (result.intent != OUT_OF_SCOPE)
    assert result.intent not in {s.intent for s in result.runner_ups}
    assert all(0.0 <= s.score <= 1.0 and s.intent in INTENTS for s in result.runner_ups)
    assert result.method


def test_questions_are_not_copies_of_the_scope_examples() -> None:
    scope = load_scope()
    known = {e.lower().strip(" ?.!") for spec in scope.intents.values() for e in spec.examples}
    known |= {e.lower().strip(" ?.!") for e in scope.out_of_scope_examples}
    questions = [q for q, _ in IN_SCOPE] + OUT_OF_SCOPE_QUESTIONS + [q for q, _, _ in ATTACHMENT_CASES]
    copies = [q for q in questions if q.lower().strip(" ?.!") in known]
    assert not copies


def test_case_counts() -> None:
    assert len(IN_SCOPE) >= 40
    assert {intent for _, intent in IN_SCOPE} == INTENTS
    assert len(OUT_OF_SCOPE_QUESTIONS) >= 25


@pytest.mark.parametrize(("text", "expected"), IN_SCOPE)
def test_in_scope_questions(classifier: ScopeClassifier, text: str, expected: str) -> None:
    result = classifier.classify(text)
    _check_result_shape(result)
    assert result.intent == expected, result
    assert result.in_scope
    assert result.confidence >= 0.5, result


@pytest.mark.parametrize("text", OUT_OF_SCOPE_QUESTIONS)
def test_out_of_scope_questions(classifier: ScopeClassifier, text: str) -> None:
    result = classifier.classify(text)
    _check_result_shape(result)
    assert result.intent == OUT_OF_SCOPE, result
    assert not result.in_scope
    assert result.confidence >= 0.5, result
    assert len(result.runner_ups) == 3


@pytest.mark.parametrize(("text", "has_attachments", "expected"), ATTACHMENT_CASES)
def test_attachments(classifier: ScopeClassifier, text: str, has_attachments: bool, expected: str) -> None:
    result = classifier.classify(text, has_attachments=has_attachments)
    _check_result_shape(result)
    assert result.intent == expected, result


def test_document_wording_with_attachment_is_decided_by_rule(classifier: ScopeClassifier) -> None:
    result = classifier.classify("what does the document say about cooling?", has_attachments=True)
    assert (result.intent, result.method) == ("document", "attachment")
    assert result.confidence >= 0.9


CANONICAL_CALCULATIONS = ["2 to the power of 10", "17% of 250", "1200 divided by 16", "sqrt(144) + 3", "Calculate 15 * 23 + 7"]


@pytest.mark.parametrize("text", CANONICAL_CALCULATIONS)
def test_canonical_calculations_are_recognised_by_the_scope_keywords(classifier: ScopeClassifier, text: str) -> None:
    # no arithmetic reader here (the calculator owns it): the scope's calculation keywords and patterns decide
    result = classifier.classify(text)
    assert result.in_scope and result.intent == "calculation", result
    assert "keywords" in result.method


@pytest.mark.parametrize("text", ["", "   ", "\n\t  \n"])
def test_empty_text_is_out_of_scope(classifier: ScopeClassifier, text: str) -> None:
    result = classifier.classify(text)
    assert result.intent == OUT_OF_SCOPE
    assert not result.in_scope
    assert result.confidence == 1.0
    assert result.method == "empty"


def test_very_long_text(classifier: ScopeClassifier) -> None:
    result = classifier.classify("How much disk space is left on the server? " + "x" * 20_000)
    _check_result_shape(result)
    assert result.intent == "diagnostics"
    junk = classifier.classify("lorem ipsum " * 2_000)
    _check_result_shape(junk)


def test_result_round_trips_through_the_contract(classifier: ScopeClassifier) -> None:
    result = classifier.classify("Where is the data center located?")
    assert IntentResult.model_validate_json(result.model_dump_json()) == result
    assert result.intent == "location"
    assert [s.score for s in result.runner_ups] == sorted((s.score for s in result.runner_ups), reverse=True)


def test_classifier_exposes_scope(classifier: ScopeClassifier) -> None:
    assert classifier.scope.name == "datacenter"
    assert set(classifier.intents) == INTENTS
