"""What the portal's post_migrate receivers share."""


def tables_made(apps, *models: str) -> bool:
    """Whether the state a migrate left (a post_migrate receiver's ``apps``) holds these models
    (``"app_label.Model"``), i.e. their tables exist: a migrate of some apps alone on a new
    database (``manage.py migrate contenttypes``) leaves the others' unmade. Without ``apps``
    (a receiver called directly) they are taken as made."""
    if apps is None:
        return True
    try:
        for model in models:
            apps.get_model(model)
    except LookupError:
        return False
    return True
