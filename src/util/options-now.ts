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

/**
 * A copy of a call's options; `null` or `undefined` is none. Each option the library takes is read
 * by name (`known`), as the call would read it: an inherited one (`Object.create(defaults)`) or a
 * class's getter counts. Copying own properties only dropped those, and a call meant to be
 * read-only over a named folder ran workspace-write over the process's folder (review of this
 * session's change, fix34b). Unknown names are the caller's to hear of (refuseUnknownOptions).
 */
export function optionsNow<T extends object>(
  options: T | null | undefined,
  what: string,
  known: Readonly<Record<string, true>>,
): T {
  if (options === null || options === undefined) return {} as T;
  if (typeof options !== "object" || Array.isArray(options))
    throw usageError(
      `The ${what} options must be an object, not ${Array.isArray(options) ? "an array" : typeof options}.`,
      'Pass the options as an object, e.g. { cwd: "/path/to/project" }, or leave them out.',
    );
  const copy: Record<string, unknown> = {};
  const given = options as Record<string, unknown>;
  for (const key of new Set([...Object.keys(known), ...Object.keys(given)])) {
    const value = given[key];
    if (value === undefined && !Object.hasOwn(given, key)) continue;
    copy[key] = Array.isArray(value) ? [...value] : isPlainObject(value) ? { ...value } : value;
  }
  return copy as T;
}
