// This package's own version, read once from its package.json (two levels above both src/util and
// dist/util), for run records and the CLI's --version.
import fs from "node:fs";

let cached: string | undefined;

export function sandboxRunVersion(): string {
  if (cached) return cached;
  try {
    const own = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version?: unknown;
    };
    cached = typeof own.version === "string" ? own.version : "unknown";
  } catch {
    cached = "unknown";
  }
  return cached;
}
