"""The Agent Protocol / LangGraph Server subset: what the official langgraph-sdk client calls.

views (graph state -> protocol objects), models (validated request bodies), store (thread and run
records in JetStream KV), runs (the run manager: create, cancel, follow; the work-queue runner that
executes runs) and routes (the HTTP transport, an APIRouter)."""
