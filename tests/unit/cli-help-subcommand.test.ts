// `sandbox-run help <command> <subcommand>` shows the subcommand's own help (review, session 27:
// commander's help command looked one level down and printed `image`'s help, without --apt).
import { describe, expect, it } from "vitest";
import { runCliInProcess } from "../support/in-process-cli.js";

function cli(argv: string[]) {
  return runCliInProcess(argv, {});
}

describe("help of a subcommand", () => {
  it("help image build prints what image build --help prints", async () => {
    const viaHelp = await cli(["help", "image", "build"]);
    const viaFlag = await cli(["image", "build", "--help"]);
    expect(viaHelp.code, viaHelp.stderr).toBe(0);
    expect(viaHelp.stdout).toContain("Usage: sandbox-run image build");
    expect(viaHelp.stdout).toContain("--apt");
    expect(viaHelp.stdout).toBe(viaFlag.stdout);
  });

  it("help image still prints the help of image", async () => {
    const result = await cli(["help", "image"]);
    expect(result.stdout).toContain("Usage: sandbox-run image [options] [command]");
  });
});
