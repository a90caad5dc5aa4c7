//! The tree against a naive model that keeps every envelope's parent and the
//! pointer's whole history.

use proptest::prelude::*;

use super::*;

/// What the model knows after a sequence of steps.
#[derive(Default)]
struct Model {
    /// By seq - 1: `Some(parent)` for a regular envelope, `None` for a branch.
    parents: Vec<Option<u64>>,
    /// The pointer after each envelope (index seq - 1).
    pointers: Vec<u64>,
    branches: Vec<Branch>,
}

impl Model {
    fn pointer(&self) -> u64 {
        self.pointers.last().copied().unwrap_or(0)
    }

    fn append(&mut self) {
        let parent = self.pointer();
        self.parents.push(Some(parent));
        self.pointers.push(self.parents.len() as u64);
    }

    fn branch(&mut self, at: u64) {
        self.parents.push(None);
        self.pointers.push(at);
        self.branches.push(Branch {
            seq: self.parents.len() as u64,
            at,
        });
    }

    fn regular(&self) -> Vec<u64> {
        (1..=self.parents.len() as u64)
            .filter(|s| self.parents[*s as usize - 1].is_some())
            .collect()
    }

    fn chain(&self, mut leaf: u64) -> Vec<u64> {
        let mut out = Vec::new();
        while leaf > 0 {
            out.push(leaf);
            leaf = self.parents[leaf as usize - 1].expect("regular");
        }
        out.reverse();
        out
    }

    fn children(&self, of: u64) -> Vec<u64> {
        self.regular()
            .into_iter()
            .filter(|s| self.parents[*s as usize - 1] == Some(of))
            .collect()
    }

    fn tree(&self) -> Tree {
        Tree::new(self.branches.clone(), self.parents.len() as u64)
    }
}

fn flat(ranges: &[std::ops::RangeInclusive<u64>]) -> Vec<u64> {
    ranges.iter().flat_map(|r| r.clone()).collect()
}

/// A step: append `n` regular envelopes, or branch to the `k`-th regular
/// envelope (modulo their number; 0 when there is none, or for `k == 0`).
#[derive(Debug, Clone)]
enum Step {
    Append(u8),
    Branch(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1u8..6).prop_map(Step::Append),
        2 => any::<u16>().prop_map(Step::Branch),
    ]
}

fn check(model: &Model) {
    let tree = model.tree();
    assert_eq!(tree.pointer(), model.pointer(), "pointer");
    let regular = model.regular();
    for &s in &regular {
        assert_eq!(
            Some(tree.parent(s)),
            model.parents[s as usize - 1],
            "parent of {s}"
        );
        assert_eq!(flat(&tree.path(s)), model.chain(s), "path to {s}");
        assert!(tree.is_regular(s));
    }
    for b in &model.branches {
        assert!(tree.is_branch(b.seq) && !tree.is_regular(b.seq));
    }
    assert_eq!(
        flat(&tree.active()),
        model.chain(model.pointer()),
        "active path"
    );
    let active = model.chain(model.pointer());
    let mut points = Vec::new();
    for at in std::iter::once(0).chain(regular.iter().copied()) {
        let children = model.children(at);
        assert_eq!(tree.children(at), children, "children of {at}");
        if children.len() > 1 {
            points.push(Point {
                at,
                active: children.iter().copied().find(|c| active.contains(c)),
                versions: children,
            });
        }
        // Where the pointer last stood under `at`.
        if at > 0 {
            let visit = model
                .pointers
                .iter()
                .rev()
                .copied()
                .find(|&p| p > 0 && model.chain(p).contains(&at))
                .expect("the pointer stood on `at` when it was logged");
            assert_eq!(tree.last_visit(at), visit, "last visit under {at}");
        }
        let next = active
            .iter()
            .position(|&s| s == at)
            .map(|i| active.get(i + 1).copied())
            .unwrap_or_else(|| (at == 0).then(|| active.first().copied()).flatten());
        assert_eq!(
            tree.next_on_path(tree.pointer(), at),
            next,
            "next after {at}"
        );
    }
    assert_eq!(tree.points(), points, "points");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_tree_agrees_with_the_model(steps in proptest::collection::vec(step(), 0..40)) {
        let mut model = Model::default();
        for s in steps {
            match s {
                Step::Append(n) => (0..n).for_each(|_| model.append()),
                Step::Branch(k) => {
                    let regular = model.regular();
                    let at = if k == 0 || regular.is_empty() {
                        0
                    } else {
                        regular[k as usize % regular.len()]
                    };
                    model.branch(at);
                }
            }
            check(&model);
        }
    }
}

#[test]
fn a_straight_log_is_one_path() {
    let tree = Tree::new(Vec::new(), 7);
    assert_eq!(tree.active(), vec![1..=7]);
    assert_eq!(tree.pointer(), 7);
    assert!(tree.points().is_empty());
}

#[test]
fn an_edit_and_a_switch_back() {
    // 1 user, 2..=4 the answer, 5 user, 6..=7 the answer; 8 branches to 4
    // (an edit of 5), 9 the new text, 10..=11 its answer.
    let mut tree = Tree::new(vec![Branch { seq: 8, at: 4 }], 11);
    assert_eq!(tree.active(), vec![1..=4, 9..=11]);
    assert_eq!(
        tree.points(),
        vec![Point {
            at: 4,
            versions: vec![5, 9],
            active: Some(9)
        }]
    );
    // Back to the first version: where it was left.
    assert_eq!(tree.last_visit(5), 7);
    tree.push_branch(Branch { seq: 12, at: 7 });
    assert_eq!(tree.pointer(), 7);
    assert_eq!(tree.active(), vec![1..=7]);
    assert_eq!(tree.points()[0].active, Some(5));
    tree.grow_to(13);
    assert_eq!(tree.active(), vec![1..=7, 13..=13]);
}

#[test]
fn read_spans_merge_ranges_across_small_gaps_only() {
    let path = [1..=3, 6..=9, 100..=120, 125..=125];
    assert_eq!(
        Tree::read_spans(&path, 0, 4),
        vec![1..=9, 100..=125],
        "gaps of 2 and 4 merged, 90 not"
    );
    assert_eq!(Tree::read_spans(&path, 0, 0), path.to_vec());
    // Past `after`: what is left of the range it falls in, and the rest.
    assert_eq!(Tree::read_spans(&path, 7, 4), vec![8..=9, 100..=125]);
    assert_eq!(Tree::read_spans(&path, 9, 100), vec![100..=125]);
    assert_eq!(
        Tree::read_spans(&path, 125, 4),
        Vec::<RangeInclusive<u64>>::new()
    );
    assert_eq!(
        Tree::read_spans(&[], 0, 4),
        Vec::<RangeInclusive<u64>>::new()
    );
}
