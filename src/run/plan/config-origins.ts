// In CI the workspace is usually the checkout of the change under review. A policy, models, schema or
// prompt file that lies inside it (or inside an extra writable root) is written by that change: it
// chooses its own boundary, and a `!command` in such a models.json would run on the host before any
// container exists. This finds such files so the run can warn, refuse (strict mode), and never run
// their commands.
import fs from "node:fs";
import path from "node:path";

export interface ConfigFiles {
  policy?: string;
  models?: string;
  schema?: string;
  prompt?: string;
}

interface InsideFile {
  what: keyof ConfigFiles;
  file: string;
  /** The workspace or writable root it lies in. */
  root: string;
}

/** The config files that lie inside one of `roots` (all canonical paths), by their real path. */
export function configInsideRoots(files: ConfigFiles, roots: readonly string[]): InsideFile[] {
  const inside: InsideFile[] = [];
  for (const [what, file] of Object.entries(files) as Array<[keyof ConfigFiles, string | undefined]>) {
    if (!file) continue;
    const real = realOrResolved(file);
    const root = roots.find((r) => real === r || real.startsWith(`${r}/`));
    if (root) inside.push({ what, file: real, root });
  }
  return inside;
}

export function describeInside({ what, file, root }: InsideFile): string {
  return `the ${what} file ${file} lies inside ${root}, which this run sandboxes: whoever can change that tree chooses this run's ${what === "policy" ? "boundary" : what}`;
}

/** Whether a parsed models.json holds a `!command` value anywhere (keys, headers, per model). */
export function modelsJsonHasCommands(value: unknown): boolean {
  if (typeof value === "string") return value.startsWith("!");
  if (Array.isArray(value)) return value.some(modelsJsonHasCommands);
  if (value && typeof value === "object") return Object.values(value).some(modelsJsonHasCommands);
  return false;
}

function realOrResolved(file: string): string {
  try {
    return fs.realpathSync(file);
  } catch {
    return path.resolve(file);
  }
}
