"""Usage of team namespaces: collecting it (cluster, Prometheus, CSV), rolling it up per day, and
reading it back for the rules and the suggestions."""
