// Option names the library takes, checked at run time too: TypeScript catches a misspelt option,
// JavaScript and JSON-driven callers do not, and a dropped option is a run with another boundary
// than the caller meant (review, session 30: `workspace: "copy"` ran in bind mode, `writable: [...]`
// lent no extra folder).
import { usageError } from "../errors.js";
import { nameMeant } from "./edit-distance.js";

/** The CLI's flag names a caller of the library may reach for. */
const FLAG_NAMES: Record<string, string> = {
  workspace: "workspaceMode",
  writable: "additionalWritableDirectories",
  timeout: "timeoutMs",
  handback: "handBack",
  record: "record",
};

/** Throws a usage error naming every key of `given` that `known` lacks, with the name it probably meant. */
export function refuseUnknownOptions(
  given: object | undefined,
  known: Readonly<Record<string, true>>,
  what: string,
): void {
  if (!given || typeof given !== "object") return;
  const names = Object.keys(known);
  const unknown = Object.keys(given).filter((key) => !Object.hasOwn(known, key));
  if (unknown.length === 0) return;
  const listed = unknown.map((key) => {
    const meant = optionMeant(key, names);
    return meant ? `${key} (did you mean ${meant}?)` : key;
  });
  throw usageError(
    `Unknown ${what} option${unknown.length > 1 ? "s" : ""}: ${listed.join(", ")}.`,
    `Use the option names the library takes (${names.join(", ")}).`,
  );
}

function optionMeant(key: string, names: readonly string[]): string | undefined {
  const flag = FLAG_NAMES[key.toLowerCase()];
  return flag && names.includes(flag) ? flag : nameMeant(key, names);
}

/**
 * The options whose kind the run relies on and JavaScript does not check: a listener that was no
 * function was dropped without a word, a signal that was no AbortSignal failed as a TypeError
 * (review, session 34).
 */
export function refuseMistypedOptions(given: object | null | undefined, what: string): void {
  if (!given || typeof given !== "object") return;
  const { onEvent, signal } = given as { onEvent?: unknown; signal?: unknown };
  if (onEvent !== undefined && typeof onEvent !== "function")
    throw usageError(
      `The ${what} option onEvent must be a function, not ${kindOf(onEvent)}.`,
      "Pass a listener, (event) => { ... }, or leave onEvent out.",
    );
  if (signal !== undefined && !isAbortSignal(signal))
    throw usageError(
      `The ${what} option signal must be an AbortSignal, not ${kindOf(signal)}.`,
      "Pass an AbortController's signal (or AbortSignal.timeout(ms)), or leave signal out.",
    );
}

/** An AbortSignal, also one of another realm (a vm context's): what listening to it needs. */
function isAbortSignal(value: unknown): boolean {
  if (value instanceof AbortSignal) return true;
  const s = value as { aborted?: unknown; addEventListener?: unknown; removeEventListener?: unknown } | null;
  return (
    typeof s === "object" &&
    s !== null &&
    typeof s.aborted === "boolean" &&
    typeof s.addEventListener === "function" &&
    typeof s.removeEventListener === "function"
  );
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "a plain object" : `a ${typeof value}`;
}
