//! The fold policy, on a tail alone (no database).

use super::*;

fn words(chat: Uuid, from: u64, n: u64) -> AppendBatch {
    AppendBatch {
        chat_id: chat,
        envelopes: (from..from + n)
            .map(|seq| NewEnvelope {
                seq,
                kind: "chat.print",
                ts_ms: 0,
                corr: None,
                client_msg_id: None,
                json: format!(r#"{{"seq":"{seq:06}","pad":"{}"}}"#, "w".repeat(100)).into(),
            })
            .collect(),
        state: None,
        conversation_state: None,
        fence: None,
    }
}

/// Commits `batches` as planned at `now` (each chat's first write is read
/// back as `seq - 1`, as if the table held what came before).
fn commit(tail: &mut Tail, batches: &[AppendBatch], now: Instant) -> Plan {
    let plan = tail.plan(batches, now);
    let probed: Vec<_> = plan
        .probe
        .iter()
        .map(|c| {
            let b = batches.iter().find(|b| b.chat_id == *c).unwrap();
            (*c, b.envelopes.last().unwrap().seq)
        })
        .collect();
    tail.commit(&plan, batches, &probed, now);
    plan
}

#[test]
fn fold_limits_are_jittered_between_half_and_one_and_a_half() {
    let chats: Vec<Uuid> = (0..2000).map(|_| Uuid::new_v4()).collect();
    let bytes: HashSet<usize> = chats.iter().map(fold_bytes).collect();
    assert!(bytes.len() > 500, "spread over many values");
    assert!(
        bytes
            .iter()
            .all(|b| (FOLD_BYTES / 2..FOLD_BYTES * 3 / 2).contains(b))
    );
    let ages: Vec<Duration> = chats.iter().map(fold_age).collect();
    assert!(
        ages.iter()
            .all(|a| *a >= FOLD_AGE / 2 && *a < FOLD_AGE * 3 / 2)
    );
}

#[test]
fn streaming_chats_stay_journaled_and_quiet_ones_fold_a_few_per_commit() {
    let t0 = Instant::now();
    let mut tail = Tail::new(1);
    let chats: Vec<Uuid> = (0..100).map(|_| Uuid::new_v4()).collect();
    // First writes go to the table (last seq unknown), then one word per
    // chat per commit to the journal.
    let first: Vec<_> = chats.iter().map(|&c| words(c, 1, 1)).collect();
    let plan = commit(&mut tail, &first, t0);
    assert_eq!((plan.direct.len(), plan.probe.len()), (100, 100));
    for seq in 2..=6 {
        let at = t0 + Duration::from_millis(20 * seq);
        let batches: Vec<_> = chats.iter().map(|&c| words(c, seq, 1)).collect();
        let plan = commit(&mut tail, &batches, at);
        assert_eq!(plan.journal.len(), 100, "seq {seq}");
        assert!(plan.folds.is_empty() && plan.direct.is_empty());
    }
    // Still streaming (last word 20 ms ago): nothing is due.
    let other = Uuid::new_v4();
    let now = t0 + Duration::from_millis(140);
    assert!(tail.plan(&[words(other, 1, 1)], now).folds.is_empty());

    // Gone quiet: each commit folds its budget of rows (five per chat
    // here), oldest first, until every chat is folded.
    let mut now = t0 + Duration::from_millis(120) + QUIET;
    let (mut folded, mut commits, mut seq) = (HashSet::new(), 0, 1);
    while folded.len() < chats.len() {
        now += Duration::from_millis(2);
        let plan = commit(&mut tail, &[words(other, seq, 1)], now);
        seq += 1;
        commits += 1;
        assert!(!plan.folds.is_empty());
        let rows: usize = plan.folds.iter().map(|f| f.rows).sum();
        assert!(rows <= AGE_FOLD_ROWS, "{rows} rows folded in one commit");
        for fold in &plan.folds {
            match tail.chats.get(&fold.chat) {
                None => assert!(folded.insert(fold.chat), "folded once"),
                // The budget's last chat: its oldest rows, the rest next time.
                Some(left) => assert_eq!(left.rows.len() + fold.rows, 5),
            }
        }
        assert!(commits < 100);
    }
    assert!(commits >= (chats.len() * 5).div_ceil(AGE_FOLD_ROWS));
    assert!(tail.read(&chats[0], 0, |_| true).0.is_empty());
    assert_eq!(
        tail.bytes,
        tail.chats.values().map(|p| p.bytes).sum::<usize>()
    );
}

#[test]
fn a_writer_that_fell_behind_does_not_fold_every_chat_at_once() {
    let t0 = Instant::now();
    let mut tail = Tail::new(1);
    let chats: Vec<Uuid> = (0..100).map(|_| Uuid::new_v4()).collect();
    let first: Vec<_> = chats.iter().map(|&c| words(c, 1, 1)).collect();
    commit(&mut tail, &first, t0);
    let second: Vec<_> = chats.iter().map(|&c| words(c, 2, 1)).collect();
    commit(&mut tail, &second, t0);
    // A slow commit: each chat queued ten words meanwhile, in one batch,
    // and two more in a second one.
    let mut late: Vec<_> = chats.iter().map(|&c| words(c, 3, 10)).collect();
    late.extend(chats.iter().map(|&c| words(c, 13, 2)));
    let now = t0 + Duration::from_millis(200);
    let plan = commit(&mut tail, &late, now);
    assert_eq!((plan.journal.len(), plan.direct.len()), (1200, 0));
    assert!(plan.folds.is_empty());
    let (rows, lowest) = tail.read(&chats[9], 0, |_| true);
    assert_eq!(
        rows.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (2..=14).collect::<Vec<_>>()
    );
    assert_eq!(lowest, Some(2));
    // A chat whose batches in one commit do not follow each other goes to
    // the table with its tail (whose key refuses the taken seq).
    let clash = [words(chats[0], 15, 1), words(chats[0], 15, 1)];
    let plan = tail.plan(&clash, now);
    let whole = Fold {
        chat: chats[0],
        rows: 13,
    };
    assert_eq!(
        (plan.direct.len(), plan.folds.as_slice()),
        (2, &[whole][..])
    );
}

#[test]
fn a_chat_streaming_past_its_fold_size_or_age_is_folded() {
    let t0 = Instant::now();
    let mut tail = Tail::new(1);
    let chat = Uuid::new_v4();
    commit(&mut tail, &[words(chat, 1, 1)], t0);
    // One word every 20 ms, each ~120 bytes: the chat goes to the table
    // with its whole tail once it reaches its (jittered) size.
    let mut seq = 2;
    let mut now = t0;
    let folded_at = loop {
        now += Duration::from_millis(20);
        let plan = commit(&mut tail, &[words(chat, seq, 1)], now);
        if !plan.folds.is_empty() {
            assert_eq!((plan.folds.len(), plan.direct.len()), (1, 1));
            break seq;
        }
        seq += 1;
        assert!(seq < 2000);
    };
    let row = words(chat, 1, 1).envelopes[0].json.len();
    let limit = fold_bytes(&chat);
    assert!((folded_at as usize - 2) * row < limit && limit <= (folded_at as usize - 1) * row);

    // A slow chat (a word every 2 s is never quiet for QUIET... but its
    // rows grow old): folded once its first row is past its age.
    let slow = Uuid::new_v4();
    commit(&mut tail, &[words(slow, 1, 1)], now);
    let start = now;
    let mut seq = 2;
    loop {
        now += QUIET / 2;
        let plan = commit(&mut tail, &[words(slow, seq, 1)], now);
        seq += 1;
        // Its own commit journals it; the next commit (another chat's) may fold it.
        let plan2 = commit(&mut tail, &[words(chat, 1000 + seq, 1)], now);
        let folds = plan.folds.iter().chain(&plan2.folds);
        if folds.map(|f| f.chat).any(|c| c == slow) {
            break;
        }
        assert!(now.duration_since(start) < FOLD_AGE * 2);
    }
    assert!(now.duration_since(start) >= fold_age(&slow));
}

#[test]
fn a_long_quiet_tail_is_folded_in_bounded_steps_and_reads_stay_whole() {
    let t0 = Instant::now();
    let mut tail = Tail::new(1);
    let (long, other) = (Uuid::new_v4(), Uuid::new_v4());
    commit(&mut tail, &[words(long, 1, 1), words(other, 1, 1)], t0);
    // A burst's chat: 200 rows journaled in small batches (interleaved with
    // another chat's words, so its journal ids are not contiguous).
    for i in 0..100 {
        let at = t0 + Duration::from_millis(i);
        commit(
            &mut tail,
            &[words(long, 2 + 2 * i, 2), words(other, 2 + i, 1)],
            at,
        );
    }
    let other_first = tail.chats[&other].first_id;
    assert_eq!(tail.read(&long, 0, |_| true).0.len(), 200);
    // Quiet now. While `other`'s words come (a row a commit), each commit
    // folds a few of `long`'s oldest rows; once the writer is idle, its tidy
    // commits (no rows of their own) fold the budget each.
    let mut now = t0 + Duration::from_millis(100) + QUIET;
    let (mut steps, mut seq) = (0, 102);
    while tail.chats.contains_key(&long) {
        now += Duration::from_millis(2);
        let live = steps < 10;
        let batches = if live {
            vec![words(other, seq, 1)]
        } else {
            vec![]
        };
        let plan = commit(&mut tail, &batches, now);
        seq += 1;
        steps += 1;
        let fold = plan.folds.iter().find(|f| f.chat == long).unwrap();
        let most = if live { LIVE_FOLD_ROWS } else { AGE_FOLD_ROWS };
        assert!(fold.rows <= most, "{} rows in one commit", fold.rows);
        // The rows left are the newest, read whole from the tail; the journal
        // head kept for them (and for `other`, still streaming) is not deleted.
        if let Some(p) = tail.chats.get(&long) {
            let (rows, lowest) = tail.read(&long, 0, |_| true);
            assert_eq!(rows.last().map(|r| r.seq), Some(201));
            assert_eq!(lowest, Some(202 - rows.len() as u64));
            assert!(tail.deleted_below <= p.first_id.min(other_first));
        }
        assert!(steps <= 10 + 200 / AGE_FOLD_ROWS + 1);
    }
    assert!(steps > 1, "folded in steps");
    assert_eq!(
        tail.bytes,
        tail.chats.values().map(|p| p.bytes).sum::<usize>()
    );
}
