"""The console's topics: each subscription with its queue, kind and backlog, a topic
without subscriptions as one row, and pages by topic."""

from __future__ import annotations

from courier.db import repository
from helpers.consoles import StartConsole


async def test_topics_list_their_subscriptions_with_backlogs(
    repo: repository.Repository, start_console: StartConsole
) -> None:
    alice = await repo.register_client("alice")
    instance = await repo.register_instance("127.0.0.1:1")
    news = await repo.create_topic("news", creator=alice.id)
    await repo.create_topic("quiet", creator=alice.id)
    kept = await repo.subscribe(alice.id, "news", instance_id=instance.id)
    fleeting = await repo.subscribe(alice.id, news.id, instance_id=instance.id, durable=False)
    for body in (b"one", b"two"):
        await repo.publish(alice.id, "news", body)
    await repo.unsubscribe(fleeting.queue)
    await repo.publish(alice.id, "news", b"three")
    console = await start_console()

    body = await console.get_json("/api/topics")
    assert [
        (r["topic_name"], r["subscription"], r["kind"], r["backlog"])
        for r in body["topics"]["items"]
    ] == [
        ("news", "alice", "durable", 3),
        ("quiet", None, None, None),
    ]
    (row, _) = body["topics"]["items"]
    assert (row["queue"], row["queue_name"], row["subscriber_name"]) == (
        kept.queue,
        "news:alice",
        "alice",
    )
    first = await console.get_json("/api/topics", limit=1)
    assert [r["topic_name"] for r in first["topics"]["items"]] == ["news"]
    assert first["topics"]["next_after"] == news.id
    rest = await console.get_json("/api/topics", limit=1, after=news.id)
    assert [r["topic_name"] for r in rest["topics"]["items"]] == ["quiet"]
    assert rest["topics"]["next_after"] is None
    page = await console.http.get("/topics")
    assert page.status_code == 200 and "news:alice" in page.text
