"""MLflow tracking: the client, the publishing of sweep results, and study logging."""
