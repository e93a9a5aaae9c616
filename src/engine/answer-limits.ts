// How much and how long the host takes from an engine's answers (bounded-answers.ts). A file of its
// own, free of dockerode's types: the options that carry it are part of the published library, whose
// .d.ts files must compile in a project without @types/dockerode.

export interface AnswerLimits {
  /** Default MAX_ENGINE_ANSWER_BYTES (bounded-answers.ts). */
  maxBytes?: number;
  /** Default ENGINE_ANSWER_TIMEOUT_MS (bounded-answers.ts); it also bounds requests a caller can cancel, except those with a deadline of their own (removal, kill). */
  timeoutMs?: number;
  /** How long an orphan's removal may take (DockerEngine.removeContainer); default 60 s. */
  removalTimeoutMs?: number;
}
