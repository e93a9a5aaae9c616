// What `sandbox-run show` makes of a record: plain data, built on the host (build-run-view.ts),
// embedded in the page as JSON and drawn by the page's script (page-script.ts), or printed as
// Markdown (markdown-summary.ts). Every string in it came from the record, so every string is
// hostile text: it is only ever put on the page with textContent, never parsed as HTML.
// Long texts are `Shown`: cut to the page's budget, with how much was left out.

/** A text from the record as the page shows it: cut at a cap, `omitted` characters left out. */
export interface Shown {
  text: string;
  omitted?: number;
}

export interface Fact {
  label: string;
  value: string;
  /** A second line in smaller type (e.g. where the value came from). */
  note?: string;
}

export interface RunView {
  /** The shape of this data; the page's script reads only this version. */
  view: 1;
  /** "sandbox-run 0.1.0": the version that made the page. */
  madeBy: string;
  /** The record folder as the caller named it. */
  record: string;
  integrity: { state: "ok" | "mismatch" | "unchecked"; matched: number; problems: string[] };
  outcome: OutcomeView;
  facts: Fact[];
  /** meta.json's recordNotes: what the run could not record. */
  recordNotes: string[];
  /** What this page left out of the record (its size caps), and where to find it. */
  pageNotes: string[];
  /** The record is of a newer format than this version reads: the page may be incomplete or misread. */
  newerFormat?: string;
  prompt?: Shown;
  timeline: TimelineView;
  turns: TurnView[];
  /** Model exchanges no turn claims (retries, requests outside Pi's conversation). */
  looseExchanges: ExchangeView[];
  decisions: DecisionsView;
  changes: ChangesView;
  result?: ResultView;
  /** Sandbox events this version does not draw elsewhere (newer writers add some). */
  otherEvents: Array<{ timeMs: number; type: string; data: Shown; count: number }>;
  /** meta.json fields not shown among the facts. */
  otherMeta: Array<{ key: string; value: Shown }>;
}

export interface OutcomeView {
  state: "ok" | "failed" | "unknown";
  /** "text" or "structured" for a result. */
  kind?: string;
  error?: {
    code: string;
    message: Shown;
    hint?: Shown;
    limit?: string;
    exitCode?: string;
    stderrTail?: Shown;
  };
}

export interface TimelineView {
  /** The run's length on the page's scale (ms since the run started). */
  totalMs: number;
  rows: Array<{ name: string; spans: TimelineSpan[] }>;
}

interface TimelineSpan {
  startMs: number;
  endMs: number;
  label: string;
  /** What colour it gets: a phase, a turn, a model request, a tool, a failure. */
  kind: "phase" | "turn" | "model" | "tool" | "tool-error" | "failure";
}

export interface TurnView {
  /** 1, 2, ... in the order Pi started them. */
  index: number;
  startMs: number;
  endMs?: number;
  /** What the model wrote (text parts), and its thinking when it showed any. */
  text?: Shown;
  thinking?: Shown;
  stopReason?: string;
  /** The model's error for this turn (Pi's errorMessage). */
  error?: Shown;
  usage?: { input?: number; output?: number; costUsd?: number };
  tools: ToolView[];
  /** Exchanges (by seq) that ended while this turn ran. */
  exchanges: ExchangeView[];
}

export interface ToolView {
  id: string;
  name: string;
  /** The arguments as JSON, pretty-printed. */
  args: Shown;
  /** A one-line preview of the arguments (a bash command, a path). */
  summary: string;
  output?: Shown;
  isError?: boolean;
  startMs?: number;
  endMs?: number;
  /** The run's final-result tool. */
  final?: boolean;
  /** Non-text parts of the output (images), by kind, not shown. */
  otherParts?: string[];
}

export interface HeaderLine {
  name: string;
  value: string;
}

export interface ExchangeView {
  seq: number;
  endMs?: number;
  method: string;
  target: string;
  status: number;
  relay: string;
  durationMs: number;
  /** Pi's conversation ("first", "extension", "retry"), or "off" (with why). */
  chain?: string;
  reply?: { text: Shown; toolCalls: Array<{ name: string; args: Shown }>; stopReason?: string; error?: string };
  requestHeaders: HeaderLine[];
  responseHeaders: HeaderLine[];
  /** Credential-looking headers found in the record and not shown (a record never holds any). */
  hiddenHeaders: string[];
  requestBody?: Shown;
  requestBodyCut?: boolean;
  responseBody?: Shown;
  responseBodyCut?: boolean;
  /** The record holds no bytes of this exchange, and why. */
  omitted?: string;
  scrubbed?: boolean;
}

export interface DecisionsView {
  gateway: { requests: number; refused: number; bytesUp: number; bytesDown: number };
  refusals: Array<{ reason: string; text: string; method: string; path: string; status: string; count: number }>;
  egress: EgressHostView[];
  /** Secrets of the policy: name and hosts, and how often each was put into a request (never a value). */
  secrets: Array<{ name: string; hosts: string[]; injected: number }>;
  violations: Array<{ path: string; change: string; rule?: string }>;
  violationCount: number;
  restore?: {
    reverted: string[];
    removed: string[];
    modes: string[];
    notRestored: string[];
    /** What the check after the restore still found ("path: still <change>"). */
    remaining: string[];
    clean?: boolean;
  };
  /** How the workspace came back (copy mode: applied, kept, not applied). */
  handBack: string[];
  limits: Array<{ code: string; limit?: string; message: string }>;
  contradictions: string[];
  invalidRecords: { count: number; previews: string[] };
  warnings: string[];
  replay: Array<{ type: string; text: string }>;
}

export interface EgressHostView {
  host: string;
  port: string;
  allowed: number;
  denied: number;
  failed: number;
  injected: number;
  reasons: string[];
  secrets: string[];
}

export interface ChangesView {
  files: FileDiffView[];
  /** Files of the patch past the page's cap (named, not drawn). */
  omittedFiles: string[];
  /** Every file of the patch, also those neither drawn nor named (past both caps). */
  totalFiles: number;
  /** changes-notes.txt: what the patch left out. */
  notes?: Shown;
  /** No changes.patch in the record (e.g. a run that failed before it could be made). */
  missing: boolean;
  /** meta.json's changedFiles, which a patch may not cover (extra writable roots). */
  changedFiles?: {
    created: string[];
    modified: string[];
    deleted: string[];
    /** How many the run changed of each kind (the lists above may name fewer). */
    counts: { created: number; modified: number; deleted: number };
  };
}

export interface FileDiffView {
  name: string;
  oldName?: string;
  status: "added" | "deleted" | "modified" | "renamed" | "binary" | "mode";
  added: number;
  removed: number;
  /** The file's part of the patch (hunks), as text; the page colours each line by its first character. */
  body: Shown;
}

export interface ResultView {
  kind: "text" | "structured";
  value: Shown;
  schema?: Shown;
  check: { state: "valid" | "invalid" | "no-schema" | "not-checked"; detail?: string };
}
