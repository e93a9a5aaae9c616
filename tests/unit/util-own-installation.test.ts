// Where sandbox-run's own code is loaded from, which no run may let its sandbox write.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { ownInstallation } from "../../src/util/own-installation.js";
import { tempTrees } from "../support/temp-trees.js";

const { tree } = tempTrees("sandbox-run-own-");

describe("ownInstallation", () => {
  it("names the package, each node_modules above it and, where one is a link, the folder it leads to (session 27)", () => {
    const root = fs.realpathSync(tree({ "shared/node_modules/zod/index.js": "", "app/pkg/dist/util/x.js": "" }));
    fs.symlinkSync(path.join(root, "shared/node_modules"), path.join(root, "app/pkg/node_modules"));
    const own = ownInstallation(pathToFileURL(path.join(root, "app/pkg/dist/util/x.js")).href);
    expect(own.packageRoot).toBe(path.join(root, "app/pkg"));
    expect(own.folders).toContain(path.join(root, "app/pkg/node_modules"));
    expect(own.folders).toContain(path.join(root, "shared/node_modules"));
    expect(own.folders).toContain(path.join(root, "app/node_modules"));
  });
});
