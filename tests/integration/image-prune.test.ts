// `sandbox-run image prune` on the real engine: other versions' tags go, this version's image
// stays, and an image a container still uses is kept with Docker's reason.
import crypto from "node:crypto";
import { afterAll, describe, expect, inject, it } from "vitest";
import { pruneRunnerImages } from "../../src/image/prune-images.js";
import { docker, dockerAvailable, engine, runBuiltCli } from "../support/harness.js";

const suffix = crypto.randomBytes(4).toString("hex");
const oldTag = `0.0.0-prune-old-${suffix}`;
const inUseTag = `0.0.0-prune-in-use-${suffix}`;
const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

describe.skipIf(!dockerAvailable())("image prune", () => {
  it("removes other versions' tags, keeps this version's image and one still used by a container", async () => {
    const current = inject("runnerImage");
    // An "old version": another tag of the same image.
    await docker.getImage(current).tag({ repo: "sandbox-run/pi", tag: oldTag });
    cleanups.push(() => docker.getImage(`sandbox-run/pi:${oldTag}`).remove());
    // An old image of its own that a (stopped) container still uses.
    const base = await docker.createContainer({ Image: current, Entrypoint: ["true"] });
    cleanups.push(() => base.remove({ force: true }));
    await base.commit({ repo: "sandbox-run/pi", tag: inUseTag });
    cleanups.push(() => docker.getImage(`sandbox-run/pi:${inUseTag}`).remove({ force: true }));
    const user = await docker.createContainer({ Image: `sandbox-run/pi:${inUseTag}`, Entrypoint: ["true"] });
    cleanups.push(() => user.remove({ force: true }));

    const result = await pruneRunnerImages(engine, current);
    expect(result.removed).toContain(`sandbox-run/pi:${oldTag}`);
    expect(result.removed).not.toContain(current);
    // Only this test's tags are judged: on a shared engine another run's image may be in use too.
    const keptHere = result.kept.filter((k) => k.tag.includes(suffix));
    expect(keptHere.map((k) => k.tag)).toEqual([`sandbox-run/pi:${inUseTag}`]);
    expect(keptHere[0]!.reason).toMatch(/container/);
    const left = (await docker.listImages({ filters: { reference: ["sandbox-run/pi:*"] } })).flatMap(
      (i) => i.RepoTags ?? [],
    );
    expect(left).toContain(current);
    expect(left).not.toContain(`sandbox-run/pi:${oldTag}`);
  });

  it("the CLI prints what it removed on stdout and a summary on stderr", async () => {
    const current = inject("runnerImage");
    const tag = `0.0.0-prune-cli-${suffix}`;
    await docker.getImage(current).tag({ repo: "sandbox-run/pi", tag });
    cleanups.push(() => docker.getImage(`sandbox-run/pi:${tag}`).remove());
    const run = await runBuiltCli(["image", "prune"]);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.split("\n")).toContain(`sandbox-run/pi:${tag}`);
    expect(run.stderr).toMatch(
      new RegExp(
        `removed \\d+ old runner image tag\\(s\\); kept ${current.replace(/[.]/g, "\\.")} \\(this version's\\)`,
      ),
    );
  });
});
