// A call's options as they were when the call was made. A call reads its options after an await
// (the engines' facts come first), and a caller that reuses one object for the next call
// (`opts.cwd = next; agent.run(p, opts)` in a loop) ran every call in the last folder, each
// reporting success (review, session 34). Arrays and plain objects one level down (env, the
// writable folders, a policy, a schema's top) are copied too; instances (a signal, a replay source)
// are kept as they are.
import { usageError } from "../errors.js";

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** A copy of a call's options; `null` or `undefined` is none. */
export function optionsNow<T extends object>(options: T | null | undefined, what: string): T {
  if (options === null || options === undefined) return {} as T;
  if (typeof options !== "object" || Array.isArray(options))
    throw usageError(
      `The ${what} options must be an object, not ${Array.isArray(options) ? "an array" : typeof options}.`,
      'Pass the options as an object, e.g. { cwd: "/path/to/project" }, or leave them out.',
    );
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options))
    copy[key] = Array.isArray(value) ? [...value] : isPlainObject(value) ? { ...value } : value;
  return copy as T;
}
