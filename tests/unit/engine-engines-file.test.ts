// The engines file: JSON or YAML, every mistake as a `path: message` line, paths relative to the file.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadEnginesFile, parseEnginesFile } from "../../src/engine/engines-file.js";
import type { SandboxRunError } from "../../src/errors.js";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sandbox-run-engines-file-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function problems(value: unknown): string {
  try {
    parseEnginesFile(value, "engines.json");
  } catch (error) {
    return (error as SandboxRunError).shortMessage;
  }
  throw new Error("expected the file to be refused");
}

describe("engines file", () => {
  it("reads a YAML file with each kind of engine, resolving paths against the file's folder", () => {
    const file = path.join(dir, "engines.yaml");
    fs.writeFileSync(
      file,
      [
        "engines:",
        "  - name: local",
        "    host: unix:///var/run/docker.sock",
        "    capacity: 2",
        "  - name: build-2",
        "    host: tcp://10.0.0.5:2376",
        "    tls: certs/build-2   # ca.pem, cert.pem, key.pem",
        "    capacity: 8",
        "    runtimes: [runc, runsc]",
        "  - name: podman-3",
        "    host: ssh://ci@build-3:2222",
        "    ssh:",
        "      privateKey: keys/ci",
        '      hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"',
        "      socket: /run/podman/podman.sock",
        "    capacity: 4",
        "",
      ].join("\n"),
    );
    const entries = loadEnginesFile(file);
    expect(entries).toEqual([
      {
        name: "local",
        endpoint: { kind: "unix", socketPath: "/var/run/docker.sock" },
        capacity: 2,
        sharesHostFilesystem: true,
      },
      {
        name: "build-2",
        endpoint: {
          kind: "tcp",
          host: "10.0.0.5",
          port: 2376,
          tls: {
            ca: path.join(dir, "certs/build-2/ca.pem"),
            cert: path.join(dir, "certs/build-2/cert.pem"),
            key: path.join(dir, "certs/build-2/key.pem"),
          },
        },
        capacity: 8,
        runtimes: ["runc", "runsc"],
        sharesHostFilesystem: false,
      },
      {
        name: "podman-3",
        endpoint: {
          kind: "ssh",
          host: "build-3",
          port: 2222,
          socketPath: "/run/podman/podman.sock",
          ssh: {
            user: "ci",
            privateKeyFile: path.join(dir, "keys/ci"),
            hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
          },
        },
        capacity: 4,
        sharesHostFilesystem: false,
      },
    ]);
  });

  it("reports each mistake as path: message", () => {
    const message = problems({
      engines: [
        { name: "a", host: "tcp://10.0.0.5:2375", capacity: 2 },
        { name: "a", host: "ssh://build-3", capacity: 1.5, tls: "certs" },
        { name: "-x", host: "http://x", capacity: -1, extra: true },
      ],
    });
    expect(message.split("\n").slice(1)).toEqual([
      "  engines.0.tls: required for tcp:// to another machine (plain tcp gives anyone on the network root there)",
      "  engines.1.capacity: a whole number",
      "  engines.2.name: letters, digits, '.', '_' and '-', starting with a letter or digit",
      "  engines.2.host: unix:///path, tcp://host:port or ssh://user@host[:port]",
      "  engines.2.capacity: Too small: expected number to be >=0",
      '  engines.2: Unrecognized key: "extra"',
    ]);
    expect(problems({ engines: [] })).toMatch(/engines: list at least one engine/);
    expect(problems({ engines: [{ name: "a", host: "ssh://build-3", capacity: 1, tls: "c" }] })).toMatch(
      /engines\.0\.tls: only for tcp:\/\/ engines\n {2}engines\.0\.host: name the user: ssh:\/\/user@host/,
    );
    expect(
      problems({
        engines: [
          { name: "a", host: "unix:///x", capacity: 1 },
          { name: "a", host: "unix:///y", capacity: 0 },
        ],
      }),
    ).toMatch(/engines\.1\.name: "a" is used twice/);
    expect(problems({ engines: [{ name: "a", host: "unix:///x", capacity: 0 }] })).toMatch(
      /engines: at least one engine needs a capacity above 0/,
    );
  });

  it("says when the file cannot be read or parsed", () => {
    expect(() => loadEnginesFile(path.join(dir, "missing.json"))).toThrow(
      /Cannot read the engines file .*: it does not exist\./,
    );
    const bad = path.join(dir, "bad.json");
    fs.writeFileSync(bad, "{");
    expect(() => loadEnginesFile(bad)).toThrow(/is not valid JSON/);
    const dup = path.join(dir, "dup.yml");
    fs.writeFileSync(dup, "engines: []\nengines: []\n");
    expect(() => loadEnginesFile(dup)).toThrow(/is not valid YAML/);
  });
});
