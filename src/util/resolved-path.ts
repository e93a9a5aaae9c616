import fs from "node:fs";
import path from "node:path";

/** A path with symlinks resolved as far as it exists (the rest appended as written). */
export function resolvedPath(p: string): string {
  const normal = path.normalize(p);
  const rest: string[] = [];
  for (let current = normal; ; current = path.dirname(current)) {
    try {
      return path.join(fs.realpathSync(current), ...rest.reverse());
    } catch {
      if (current === path.dirname(current)) return normal;
      rest.push(path.basename(current));
    }
  }
}

/** A path's real path, or the path normalised where it cannot be resolved (not there, a loop). */
export function realPathOr(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.normalize(p);
  }
}
