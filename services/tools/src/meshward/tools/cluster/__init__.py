"""The cluster domain: register Kubernetes clusters, report their info and health (seed 001's cluster agents).

settings (MESHWARD_CLUSTER_*, MESHWARD_SECRET_KEY) · crypto (credentials sealed at rest) · store (SQLAlchemy,
versioned migrations) · kube (read-only Kubernetes API reads: bounded, retried, paginated) · report (info and
health verdicts from raw API objects) · tools (the registry tools and the background health check).
"""
