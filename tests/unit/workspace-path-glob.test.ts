// The protectedPaths glob dialect: **, *, ?, anchored at the workspace root, dot files included.
import { describe, expect, it } from "vitest";
import { compileGlobs, globProblem, globToRegExp, literalPathOf } from "../../src/workspace/path-glob.js";

const matches = (pattern: string, p: string) => globToRegExp(pattern).test(p);

describe("globToRegExp", () => {
  it.each([
    [".github/workflows/**", ".github/workflows/ci.yml", true],
    [".github/workflows/**", ".github/workflows/nested/deep.yml", true],
    [".github/workflows/**", ".github/workflows", true],
    [".github/workflows/**", ".github/workflows-old/ci.yml", false],
    [".github/workflows/**", "x/.github/workflows/ci.yml", false],
    [".git/hooks/**", ".git/hooks/pre-commit", true],
    [".git/hooks/", ".git/hooks/pre-commit", true],
    ["./.pi/**", ".pi/settings.json", true],
    ["*.pem", "key.pem", true],
    ["*.pem", "certs/key.pem", false],
    ["**/*.pem", "certs/deep/key.pem", true],
    ["**/*.pem", "key.pem", true],
    ["**/*.pem", "key.pem.txt", false],
    ["src/**/test?.ts", "src/test1.ts", true],
    ["src/**/test?.ts", "src/a/b/test2.ts", true],
    ["src/**/test?.ts", "src/a/b/test10.ts", false],
    ["a/**/**/b", "a/x/b", true],
    ["a/**/**/b", "a/b", true],
    ["*", ".env", true],
    ["*", "dir/.env", false],
    ["**", "anything/at/all", true],
    ["package.json", "package.json", true],
    ["package.json", "package-json", false],
    ["a+b(c).txt", "a+b(c).txt", true],
    ["a+b(c).txt", "aab(c).txt", false],
    ["**/secret", "dir/with\nnewline/secret", true],
  ])("%s vs %j -> %s", (pattern, p, expected) => {
    expect(matches(pattern, p)).toBe(expected);
  });

  it("compileGlobs matches when any pattern matches", () => {
    const m = compileGlobs([".git/hooks/**", ".github/workflows/**"]);
    expect(m(".github/workflows/ci.yml")).toBe(true);
    expect(m("src/index.ts")).toBe(false);
    expect(compileGlobs([])("anything")).toBe(false);
  });
});

describe("globProblem", () => {
  it.each([
    ["/etc/passwd", "must be relative to the workspace (no leading /)"],
    ["../outside/**", "must not contain '..' or empty segments"],
    ["a//b", "must not contain '..' or empty segments"],
    ["a\\b", "must use / as the separator"],
    ["  ", "is empty"],
    // Other globs' syntax, which this one would take literally and so protect nothing (review, session 30).
    [
      "*.{pem,key}",
      'uses braces, which this glob does not expand: write one pattern per alternative (e.g. "**/*.pem" and "**/*.key")',
    ],
    [
      "deploy/[ab].yml",
      "uses a [...] class, which this glob does not know: write one pattern per name, or use ? for any one character",
    ],
    [
      "!keep.txt",
      "starts with '!', which does not negate here: protectedPaths only adds protection; leave the path out instead",
    ],
  ])("rejects %j", (pattern, problem) => {
    expect(globProblem(pattern)).toBe(problem);
  });

  it("accepts ordinary patterns", () => {
    for (const p of [".git/hooks/**", "**/*.pem", "./.pi/", "Makefile"]) expect(globProblem(p)).toBeUndefined();
  });
});

describe("literalPathOf", () => {
  it("names the directory of <dir>/** patterns and the file of wildcard-free patterns", () => {
    expect(literalPathOf(".git/hooks/**")).toEqual({ path: ".git/hooks", kind: "directory" });
    expect(literalPathOf(".pi/")).toEqual({ path: ".pi", kind: "directory" });
    expect(literalPathOf(".git/config")).toEqual({ path: ".git/config", kind: "file" });
    expect(literalPathOf("./Makefile")).toEqual({ path: "Makefile", kind: "file" });
  });

  it("has no literal path for wildcards", () => {
    expect(literalPathOf("**/*.pem")).toBeUndefined();
    expect(literalPathOf("src/*/gen/**")).toBeUndefined();
    expect(literalPathOf("**")).toBeUndefined();
    expect(literalPathOf("key?.pem")).toBeUndefined();
  });
});
