// Types of @agentwire/client/tree (tree.js). Hand-written; keep in step.

/** A chat's conversation as a tree, folded from its log (`chat.branch {at}`
 * moves the pointer back to envelope `at`). */
export declare class Tree {
  /** Each `chat.branch`'s seq → its `at`. */
  branches: Map<number, number>;
  /** The highest seq taken. */
  last: number;
  /** Takes the next envelope of the log. */
  push(envelope: { type: string; seq: number; at?: number; [field: string]: unknown }): void;
  isBranch(seq: number): boolean;
  /** The envelope a regular envelope follows (0: the chat's start). */
  parent(seq: number): number;
  /** Where the conversation goes on: the end of the active path. */
  pointer(): number;
  /** The regular envelopes from the start to `leaf`, as a set of seqs. */
  path(leaf?: number): Set<number>;
  /** The envelopes that follow `seq` directly, oldest first. */
  children(seq: number): number[];
  /** If `seq` begins one of several versions: all of them, and which it is. */
  versions(seq: number): { all: number[]; index: number } | null;
}
