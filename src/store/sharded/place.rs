//! Where a key lives among named databases: rendezvous hashing.

use sha2::{Digest, Sha256};

/// The index of the database `key` belongs to among databases `names`
/// (rendezvous hashing: the name whose SHA-256 with the key is highest).
pub fn place(names: &[String], key: &[u8]) -> usize {
    let score = |name: &str| {
        let mut h = Sha256::new();
        h.update(name.as_bytes());
        h.update([0]);
        h.update(key);
        let d = h.finalize();
        u64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
    };
    names
        .iter()
        .enumerate()
        .max_by_key(|(i, name)| (score(name), std::cmp::Reverse(*i)))
        .map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::place;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("db{i}")).collect()
    }

    #[test]
    fn a_key_stays_put_unless_the_new_database_wins_it() {
        let (two, three) = (names(2), names(3));
        let keys: Vec<uuid::Uuid> = (0..3_000).map(|_| uuid::Uuid::new_v4()).collect();
        let mut moved = 0;
        let mut counts = [0usize; 3];
        for k in &keys {
            let (before, after) = (place(&two, k.as_bytes()), place(&three, k.as_bytes()));
            counts[after] += 1;
            if before != after {
                assert_eq!(after, 2, "a key moves only to the new database");
                moved += 1;
            }
        }
        // About a third moves, and the three share the keys about evenly.
        assert!((800..1_200).contains(&moved), "{moved}");
        assert!(
            counts.iter().all(|&c| (800..1_200).contains(&c)),
            "{counts:?}"
        );
        // The order of the list does not matter, only the names.
        let reversed: Vec<String> = three.iter().rev().cloned().collect();
        for k in keys.iter().take(100) {
            let at = place(&three, k.as_bytes());
            assert_eq!(reversed[place(&reversed, k.as_bytes())], three[at]);
        }
    }
}
