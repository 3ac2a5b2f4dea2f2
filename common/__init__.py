"""The small kernel every app imports: the errors users can cause, the API's paging, error
schema and idempotency, and the FilterSet base. It imports none of the apps nor the portal."""
