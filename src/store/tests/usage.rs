//! The usage ledger, on both stores: each run's summary adds to its chat's
//! owner's and agent's day, priced or not; a purge keeps what was spent.

use super::listing::append;
use super::*;

fn summary(seq: u64, ts_ms: i64, json: &str) -> NewEnvelope {
    NewEnvelope {
        ts_ms,
        json: json.to_owned().into(),
        ..env(seq, "chat.usage_summary", None, None)
    }
}

conformance!(runs_add_up_per_user_agent_and_day, usage_on);
async fn usage_on(open: Opener) {
    let store = open().await;
    let usage = store.usage();
    // 2026-11-27 and 2026-11-28, UTC.
    let (day1, day2) = (1_795_737_600_000_i64, 1_795_824_000_000_i64);
    let mine = store.create_chat(&chat("erin")).await.unwrap().id;
    let other = ChatRecord {
        agent: "analyst".into(),
        ..chat("erin")
    };
    let other = store.create_chat(&other).await.unwrap().id;
    let theirs = store.create_chat(&chat("femi")).await.unwrap().id;
    append(
        &store,
        mine,
        vec![
            env(1, "chat.text", None, None),
            summary(
                2,
                day1 + 5,
                r#"{"prompt_tokens":100,"completion_tokens":20,"cost":0.0012}"#,
            ),
            summary(
                3,
                day1 + 9,
                r#"{"prompt_tokens":50,"completion_tokens":5,"cost":0.000000001}"#,
            ),
            // Tokens at no known price, then a run that used none.
            summary(4, day1 + 12, r#"{"prompt_tokens":7,"completion_tokens":3}"#),
            // Another model the same day: a row of its own.
            summary(
                6,
                day1 + 20,
                r#"{"prompt_tokens":4,"completion_tokens":1,"model":"qwen"}"#,
            ),
            summary(5, day2, r#"{"prompt_tokens":0,"completion_tokens":0}"#),
        ],
    )
    .await;
    append(
        &store,
        other,
        vec![summary(
            1,
            day1,
            r#"{"prompt_tokens":1,"completion_tokens":1,"cost":0.5}"#,
        )],
    )
    .await;
    append(
        &store,
        theirs,
        vec![summary(
            1,
            day2,
            r#"{"prompt_tokens":9,"completion_tokens":9}"#,
        )],
    )
    .await;

    let days = usage
        .days(Some("erin"), "2026-11-27", "2026-11-28", 100)
        .await
        .unwrap();
    let seen: Vec<_> = days
        .iter()
        .map(|d| {
            (
                d.day.as_str(),
                d.agent.as_str(),
                d.model.as_str(),
                d.runs,
                d.prompt_tokens,
                d.completion_tokens,
                d.cost_nanos,
                d.unpriced_runs,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("2026-11-27", "analyst", "", 1, 1, 1, 500_000_000, 0),
            ("2026-11-27", "demo", "", 3, 157, 28, 1_200_001, 1),
            ("2026-11-27", "demo", "qwen", 1, 4, 1, 0, 1),
            ("2026-11-28", "demo", "", 1, 0, 0, 0, 0),
        ]
    );
    // Everyone's, one day; a limit; a purge keeps what was spent.
    let all = usage
        .days(None, "2026-11-28", "2026-11-28", 100)
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|d| d.owner.as_str()).collect::<Vec<_>>(),
        ["erin", "femi"]
    );
    assert_eq!(
        usage
            .days(None, "2026-11-27", "2026-11-28", 2)
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(store.purge_chat(mine).await.unwrap());
    let kept = usage
        .days(Some("erin"), "2026-11-27", "2026-11-27", 100)
        .await
        .unwrap();
    assert_eq!(kept.iter().map(|d| d.runs).sum::<u64>(), 5);
    let none = usage
        .days(Some("erin"), "2026-11-29", "2026-12-31", 100)
        .await
        .unwrap();
    assert!(none.is_empty());
}
