"""Single sign-on with OpenID Connect (mozilla-django-oidc): the provider's endpoints, the
checks of its tokens and claims, the roles its groups give, and the login and logout views.
Off unless OIDC_ISSUER is set; PASSWORD_LOGIN switches the password form off."""
