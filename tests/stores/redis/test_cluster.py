"""The Redis store on a Redis Cluster of the session's own (tests/conftest.py's
`redis_cluster`: six redis-servers, three primaries with a replica each)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_cluster_has_three_primaries_each_with_a_replica(redis_cluster) -> None:
    from redis.cluster import RedisCluster

    assert len(redis_cluster.primaries()) == 3
    for port in redis_cluster.ports:
        assert redis_cluster.client(port).cluster("info")["cluster_state"] == "ok"
    roles = [redis_cluster.client(port).info("replication")["role"]
             for port in redis_cluster.ports]
    assert sorted(roles) == ["master"] * 3 + ["slave"] * 3
    client = RedisCluster(host=redis_cluster.host, port=redis_cluster.ports[0])
    try:
        # Keys of three hash tags that hash to slots of the three primaries.
        nodes = {client.get_node_from_key(f"{{q{i}}}").port for i in range(30)}
        assert nodes == set(redis_cluster.primaries())
    finally:
        client.close()
