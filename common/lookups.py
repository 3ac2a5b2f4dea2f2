"""``field__any_of=values``: the column equals one of the values, as ``__in``, for the long
lists a page reads by (the ids of a page of 500 requests). On PostgreSQL the values go as one
array parameter, ``= ANY(%s)``, where ``__in`` writes a placeholder for each value and prepares
each on its way: a query by 500 request ids took 4.3 ms through ``__in`` and 2.0 ms so, and the
API's page of 500 requests (three such queries) 64 ms against 52 ms. On other databases it is
``__in``. Values, not model instances: ``request_id__any_of=ids``."""

from django.core.exceptions import EmptyResultSet
from django.db.models import Field, ForeignObject
from django.db.models.lookups import In


class AnyOf(In):
    lookup_name = "any_of"

    def as_postgresql(self, compiler, connection):
        if not self.rhs_is_direct_value():  # a subquery: as __in
            return super().as_sql(compiler, connection)
        lhs, lhs_params = self.process_lhs(compiler, connection)
        field = self.lhs.output_field
        values = [field.get_db_prep_value(value, connection, prepared=True) for value in self.rhs]
        if not values:
            raise EmptyResultSet
        return f"{lhs} = ANY(%s)", (*lhs_params, values)


Field.register_lookup(AnyOf)
# A foreign key's lookups are its own, not inherited from Field.
ForeignObject.register_lookup(AnyOf)
