// Links the run left that lead out of their tree, resolved as the kernel resolves them: through the
// tree's own links. A target is not judged by its text alone: `b -> sub/a/../x` reads as inside, but
// with `sub/a -> ..` the kernel takes `sub/a/..` as the parent of the tree's top, and a host tool
// that follows `b` after the run (an artifact upload, `zip -r`, `tar -h`) reads the host's `../x`.
// So every link of the tree is kept (before and after the run), each link the run made or
// retargeted is resolved through the links after it, and the links it left alone are resolved again
// too: one that leads out only through what the run did to other links is reported as well.
import { posix } from "node:path";
import { timeSlices } from "../util/stepwise.js";

/** Links one lookup follows before the kernel gives up (ELOOP): a loop leads nowhere. */
const MAX_HOPS = 40;
/** Links the tree had that are kept per side (the run's own are all kept); past it every link the run made or retargeted is reported. */
const MAX_KEPT_LINKS = 100_000;

export interface OutwardLink {
  path: string;
  change: "created" | "modified";
  target: string;
  /**
   * How it leads out: by its own text, only through other links, or (a tree past MAX_KEPT_LINKS,
   * whose links are not all known) it may.
   */
  how: "text" | "through" | "unresolved";
}

export class OutwardLinks {
  private readonly before = new Map<string, string>();
  private readonly after = new Map<string, string>();
  /** Links the run made or retargeted, in walk order. */
  private readonly changed: Array<{ path: string; change: "created" | "modified"; target: string }> = [];
  private readonly silent = new Set<string>();
  private overflow = false;

  /** A link of the tree before the run. */
  addBefore(path: string, target: string): void {
    if (this.before.size >= MAX_KEPT_LINKS) this.overflow = true;
    else this.before.set(path, target);
  }

  /**
   * A link of the tree after the run; `change` when the run made it or changed its target. A link
   * `judged` false (inside a git directory, where the git rules judge links, or never handed back)
   * is followed, never reported.
   */
  addAfter(path: string, target: string, change: "created" | "modified" | undefined, judged = true): void {
    if (!judged) this.silent.add(path);
    else if (change) this.changed.push({ path, change, target });
    // The run's own links are kept past the cap (their text is kept in `changed` anyway): 100,000
    // links the run made first pushed `v -> sub/deeper` out, and `dist/notes.md -> ../zzz/pre-commit`
    // through `zzz -> v/../../.husky` seemed to land at `zzz/pre-commit` (fix review, round 3, session 41).
    if (change || this.after.size < MAX_KEPT_LINKS) this.after.set(path, target);
    else this.overflow = true;
  }

  /**
   * One pass over the tree's links, letting the event loop through as it goes (100,000 links took
   * ~0.8 s here, and other runs of the controller wait meanwhile):
   * - `outward`: the links that lead out of the tree now and did not before the run, in walk order;
   * - `landings`: where each link the run made or retargeted lands inside the tree (a tree path; ""
   *   the top), as the kernel resolves it through the tree's links after the run: a host write
   *   through the link writes there (fix review, round 3, session 40: `dist/notes.md ->
   *   ../.husky/pre-commit`, and the host's next write to dist/notes.md rewrote the hook).
   */
  async resolve(): Promise<{ outward: OutwardLink[]; landings: LinkLanding[] }> {
    const pause = timeSlices();
    const outward: OutwardLink[] = [];
    const landings: LinkLanding[] = [];
    const reported = new Set<string>();
    for (const { path, change, target } of this.changed) {
      const resolved = walk(parentParts(path), target, this.after, { hops: 0 });
      if (resolved !== OUT && resolved !== LOOP) landings.push({ path, change, lands: resolved.join("/") });
      const how = textLeadsOut(path, target)
        ? "text"
        : !this.overflow
          ? resolved === OUT
            ? "through"
            : undefined
          : // Past the cap the tree's links are not all known, and a link that only descends leads
            // out through a link the tree already had (`x -> old/y` with `old -> /etc`: fix review,
            // round 3, session 40, N5): every link the run made or retargeted is reported.
            "unresolved";
      if (how) {
        outward.push({ path, change, target, how });
        reported.add(path);
      }
      await pause();
    }
    if (this.overflow) return { outward, landings };
    // A link the run did not touch that the links it made, changed or removed now send out of the tree
    // (`b -> sub/a/../../..` leads out once the run replaced the link `sub/a -> x/y/z` by a folder).
    for (const [path, target] of this.after) {
      if (reported.has(path) || this.silent.has(path) || this.before.get(path) !== target) continue;
      if (leadsOut(path, this.after) && !leadsOut(path, this.before))
        outward.push({ path, change: "modified", target, how: "through" });
      await pause();
    }
    return { outward, landings };
  }
}

/** Where a link the run made or retargeted lands inside its tree (links that lead out, or nowhere, have none). */
export interface LinkLanding {
  path: string;
  change: "created" | "modified";
  /** A tree path; "" the tree's top. */
  lands: string;
}

/**
 * Whether the link at `path` (relative to the tree's top) leads out of the tree, following the
 * tree's links in `links` (path -> target) as the kernel does: an absolute target, or `..` above
 * the top at any step, leads out; a loop leads nowhere.
 */
export function leadsOut(path: string, links: ReadonlyMap<string, string>): boolean {
  const target = links.get(path);
  return target === undefined ? false : resolvesOut(parentParts(path), target, links, { hops: 0 });
}

/** Whether a target whose text is known leads out, judged by its text alone. */
export function textLeadsOut(path: string, target: string): boolean {
  return resolvesOut(parentParts(path), target, new Map(), { hops: 0 });
}

function parentParts(path: string): string[] {
  const dir = posix.dirname(path);
  return dir === "." ? [] : dir.split("/");
}

/** Walks `target` from the folder `start` (its parts): true as soon as it leaves the tree. */
function resolvesOut(
  start: string[],
  target: string,
  links: ReadonlyMap<string, string>,
  budget: { hops: number },
): boolean {
  return walk(start, target, links, budget) === OUT;
}

const OUT = Symbol("out");
const LOOP = Symbol("loop");

/** The folder parts a target resolves to, OUT when it leaves the tree, LOOP past the kernel's hops. */
function walk(
  start: string[],
  target: string,
  links: ReadonlyMap<string, string>,
  budget: { hops: number },
): string[] | typeof OUT | typeof LOOP {
  if (target.startsWith("/")) return OUT;
  let parts = [...start];
  for (const component of target.split("/")) {
    if (component === "" || component === ".") continue;
    if (component === "..") {
      if (parts.length === 0) return OUT;
      parts.pop();
      continue;
    }
    parts.push(component);
    const next = links.get(parts.join("/"));
    if (next === undefined) continue;
    if (++budget.hops > MAX_HOPS) return LOOP;
    parts.pop();
    const resolved = walk(parts, next, links, budget);
    if (resolved === OUT || resolved === LOOP) return resolved;
    parts = resolved;
  }
  return parts;
}
