"""The demo's file broker: kombu's file-system transport with every message written whole.

kombu's transport creates a message's file under its final name and only then serializes the
message into it, while a consumer takes any file of that name by moving it out of the folder (a
move ignores the writer's lock). A worker that moved the file in between read it empty and
stopped for good ("Unrecoverable error: JSONDecodeError"); under the test suite's load it
happened about once a run. Here the message is written under a name no consumer takes and
renamed into place when complete: a rename within one folder is atomic, so a consumer finds a
whole message or none. Names, order and folders are kombu's, so a worker of either kind reads
the other's messages.

``filesystem://`` selects this transport in every process that loads the portal's Celery app
(portal/celery.py).
"""

import contextlib
import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# A suffix after ".msg": kombu's consumer takes only names ending in "<queue>.msg".
PARTIAL = ".partial"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        # kombu's naming: milliseconds first, so the folder's sorted order is the sending order.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL
        body = str_to_bytes(dumps(payload))
        try:
            with open(partial, "xb", buffering=0) as f:
                f.write(body)
            os.rename(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
