"""AlterUserScramCredentials in a ZooKeeper cluster: a deletion is checked against the user's
config in ZooKeeper, not the broker's copy, which lags a write made through another broker.

* An upsert through broker 1 and, at once, the deletion through broker 2 succeeds.
* Deterministically: the credential is written into ``/config/users/<user>`` without its change
  notification yet (the window between Kafka's ``AdminZkClient`` writing the entity znode and
  its notification, in which every other broker's copy is stale); the deletion through a broker
  whose copy has never seen it succeeds and removes it from ZooKeeper.
* Deleting a credential absent from ZooKeeper is still RESOURCE_NOT_FOUND, and writes nothing.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.alter_user_scram_credentials.v0 import request as r
from kio.schema.errors import ErrorCode

from cluster.conftest import Cluster
from odradek.cli._broker_call import call_broker
from odradek.security.scram import (
    MECHANISM_TYPES,
    MECHANISMS,
    credential_from_salted,
    salted_password,
)

MECH = "SCRAM-SHA-512"


@pytest.fixture
def zk(cluster3: Cluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster3.zookeeper.connect_string + cluster3.chroot)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def _call(cluster: Cluster, broker_id: int, request: Any) -> tuple[ErrorCode, str | None]:
    response = call_broker(cluster.brokers[broker_id].bootstrap_servers, {}, request, "test")
    (result,) = response.results
    return result.error_code, result.error_message


def _upsert(cluster: Cluster, broker_id: int, user: str) -> tuple[ErrorCode, str | None]:
    salt = os.urandom(32)
    salted = salted_password(MECHANISMS[MECH], b"pw", salt, 4096)
    request = r.AlterUserScramCredentialsRequest(
        deletions=(),
        upsertions=(
            r.ScramCredentialUpsertion(
                name=user,
                mechanism=r.i8(MECHANISM_TYPES[MECH]),
                iterations=r.i32(4096),
                salt=salt,
                salted_password=salted,
            ),
        ),
    )
    return _call(cluster, broker_id, request)


def _delete(cluster: Cluster, broker_id: int, user: str) -> tuple[ErrorCode, str | None]:
    request = r.AlterUserScramCredentialsRequest(
        deletions=(r.ScramCredentialDeletion(name=user, mechanism=r.i8(MECHANISM_TYPES[MECH])),),
        upsertions=(),
    )
    return _call(cluster, broker_id, request)


def _user_configs(zk: KazooClient, user: str) -> dict[str, str]:
    data, _ = zk.get(f"/config/users/{user}")
    return dict(json.loads(data)["config"])


def test_upsert_through_one_broker_then_delete_through_another(cluster3: Cluster) -> None:
    for _ in range(5):  # bounded: five users, each one round trip per broker
        user = f"u-{uuid.uuid4().hex[:8]}"
        assert _upsert(cluster3, 1, user)[0] == ErrorCode.none
        assert _delete(cluster3, 2, user) == (ErrorCode.none, None)


def test_delete_reads_zookeeper_not_the_copy(cluster3: Cluster, zk: KazooClient) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    credential = credential_from_salted(MECHANISMS[MECH], b"x" * 64, b"salt", 4096)
    # the entity znode written as AdminZkClient writes it, its notification not yet
    zk.create(
        f"/config/users/{user}",
        json.dumps(
            {"version": 1, "config": {MECH: credential.to_config(), "producer_byte_rate": "1024"}}
        ).encode(),
        makepath=True,
    )
    assert _delete(cluster3, 2, user) == (ErrorCode.none, None)
    assert _user_configs(zk, user) == {"producer_byte_rate": "1024"}


def test_delete_of_an_absent_credential_is_resource_not_found(
    cluster3: Cluster, zk: KazooClient
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    zk.create(
        f"/config/users/{user}",
        json.dumps({"version": 1, "config": {"producer_byte_rate": "1024"}}).encode(),
        makepath=True,
    )
    _, stat = zk.get(f"/config/users/{user}")
    code, message = _delete(cluster3, 3, user)
    assert code == ErrorCode.resource_not_found
    assert message == "Attempt to delete a user credential that does not exist"
    assert zk.get(f"/config/users/{user}")[1].version == stat.version
