// A chat's conversation as a tree, folded from its log as protocol/README.md
// ("Conversations are trees") says (`@agentwire/client/tree`; the web page
// loads it as /assets/tree.js): a `chat.branch {at}` moves the pointer
// back to envelope `at`; the next envelope follows it. Nothing else changes
// the tree, and the log itself stays one line.

export class Tree {
  constructor() {
    /** @type {Map<number, number>} each chat.branch's seq → its `at` */
    this.branches = new Map();
    this.last = 0;
  }

  /** Takes the next envelope of the log. */
  push(m) {
    if (m.type === 'chat.branch') this.branches.set(m.seq, m.at);
    if (m.seq > this.last) this.last = m.seq;
  }

  isBranch(seq) {
    return this.branches.has(seq);
  }

  /** The envelope a regular envelope follows (0: the chat's start). */
  parent(seq) {
    if (seq <= 1) return 0;
    return this.branches.has(seq - 1) ? this.branches.get(seq - 1) : seq - 1;
  }

  /** Where the conversation goes on: the end of the active path. */
  pointer() {
    return this.branches.has(this.last) ? this.branches.get(this.last) : this.last;
  }

  /** The regular envelopes from the start to `leaf`, as a set of seqs. */
  path(leaf = this.pointer()) {
    const out = new Set();
    for (let cur = leaf; cur > 0; cur = this.parent(cur)) out.add(cur);
    return out;
  }

  /** The envelopes that follow `seq` directly, oldest first. */
  children(seq) {
    const out = [];
    if (seq + 1 <= this.last && !this.branches.has(seq + 1)) out.push(seq + 1);
    for (const [b, at] of this.branches) {
      if (at === seq && b + 1 <= this.last && !this.branches.has(b + 1)) out.push(b + 1);
    }
    return out.sort((a, b) => a - b);
  }

  /** If `seq` begins one of several versions: all of them, and which it is. */
  versions(seq) {
    if (this.branches.has(seq)) return null;
    const all = this.children(this.parent(seq));
    return all.length > 1 ? { all, index: all.indexOf(seq) } : null;
  }
}
