"""The llm service: chat completion with tool calling and streaming behind one interface
(a chain of OpenAI-compatible providers, or the embedded SmolLM2 model)."""
