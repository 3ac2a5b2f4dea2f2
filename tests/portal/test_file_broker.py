"""The demo's file broker hands a consumer whole messages only, whatever the moment it looks."""

import multiprocessing
import os

from kombu import Connection

# Names the file transport, here and in the spawned sender (which imports this module).
import portal.celery  # noqa: F401
from portal.broker import PARTIAL, Transport

# Slow to serialize (a C encoder escaping every "é"), so a sender in another process is still
# writing while the consumer polls every millisecond: kombu's own transport let the consumer
# take the file half-written here five times out of five.
BODY = [{"i": i, "s": "é" * 20} for i in range(100_000)]
MESSAGES = 4


def _options(folder) -> dict:
    return {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "processed_folder": str(folder),
        "control_folder": str(folder),
        "store_processed": False,
        "polling_interval": 0.001,
    }


def _send(folder) -> None:
    with Connection("filesystem://", transport_options=_options(folder)) as connection:
        queue = connection.SimpleQueue("work")
        for n in range(MESSAGES):
            queue.put({"n": n, "body": BODY})


def test_filesystem_url_is_the_transport_that_writes_whole_messages(tmp_path):
    with Connection("filesystem://", transport_options=_options(tmp_path)) as connection:
        assert isinstance(connection.transport, Transport)


def test_a_consumer_polling_while_another_process_writes_gets_every_message_whole(tmp_path):
    with Connection("filesystem://", transport_options=_options(tmp_path)) as connection:
        queue = connection.SimpleQueue("work")
        sender = multiprocessing.get_context("spawn").Process(target=_send, args=(tmp_path,))
        sender.start()
        try:
            received = []
            for _ in range(MESSAGES):
                message = queue.get(timeout=60)
                received.append(message.payload["n"])
                assert message.payload["body"] == BODY
                message.ack()
        finally:
            sender.join(timeout=60)
    assert sender.exitcode == 0
    # In the order sent, and nothing left behind: no message, no partial file.
    assert received == list(range(MESSAGES))
    assert [name for name in os.listdir(tmp_path) if name.endswith((".msg", PARTIAL))] == []
