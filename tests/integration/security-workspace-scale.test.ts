// The host's walk at scale (real engine, image, Pi, hostile model): a million new files end in a
// clear result, every count right, with the controller's memory bounded.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  bash,
  finish,
  hostilePolicy,
  hostileWorkspace,
  spawnController,
  useHostileModelServer,
} from "../support/hostile-model.js";
import { owner, removeTree } from "../support/temp-trees.js";

const server = useHostileModelServer();

describe("scale", () => {
  it("1,000,000 new files: a clear result, every count right, the controller under 300 MB RSS", async () => {
    // On a tmpfs of its own where the test may mount one (root): creating a million inodes on a
    // shared disk takes minutes; the host's walk is the same code either way.
    const ws = hostileWorkspace({}, "sandbox-run-million-");
    const mounted =
      spawnSync("mount", ["-t", "tmpfs", "-o", "size=2g,nr_inodes=1100000,mode=0700", "tmpfs", ws]).status === 0;
    try {
      const started = Date.now();
      const controller = spawnController(
        server,
        [
          bash(
            `node -e 'const fs=require("fs");for(let d=0;d<1000;d++){fs.mkdirSync("d"+d);for(let f=0;f<1000;f++)fs.closeSync(fs.openSync("d"+d+"/f"+f,"w"))}' && echo created`,
          ),
          finish(),
        ],
        {
          cwd: ws,
          // The walk's scale is what is measured here, not the entry limit (R11): room for all of them.
          policy: hostilePolicy({ limits: { timeoutSeconds: 900, memoryMb: 4096, maxEntries: 2_000_000 } }),
          reportEvents: ["workspace.changed"],
        },
      );
      const done = await controller.done;
      expect(done.ok, `${JSON.stringify(done)}\n${controller.stderr()}`).toBe(true);
      const changed = await controller.event("workspace.changed");
      const seconds = (Date.now() - started) / 1000;
      console.info(
        `1,000,000 files: ${seconds.toFixed(1)} s end to end, walks ${changed.data.snapshotMs} ms, controller max RSS ${done.maxRssMb.toFixed(0)} MB`,
      );
      expect(changed.data).toMatchObject({ created: 1_000_000, modified: 0, deleted: 0 });
      expect(done.maxRssMb, `peaks in MB: ${JSON.stringify(done.memoryPeakMb)}`).toBeLessThan(300);
      for (const p of ["d0", "d0/f0", "d999/f999", "d500/f1"]) expect(owner(path.join(ws, p)), p).toBe("0:0");
    } finally {
      if (mounted) spawnSync("umount", [ws]);
      removeTree(ws);
    }
  }, 900_000);
});
