// Splits the multiplexed stream of an attach without a TTY into stdout and stderr. Each frame
// is an 8-byte header (stream type in byte 0, payload length as a big-endian uint32 in bytes
// 4-7) and its payload. dockerode's demuxStream reads every payload with stream.read(n),
// which copies it whenever a frame spans two socket reads (with 64 KiB reads, nearly every
// large frame). Here payloads are handed on as views of the chunks they arrived in: a
// sandbox printing a gigabyte costs the host no allocation beyond the socket's own reads.

import { PassThrough, type Readable } from "node:stream";

const HEADER_BYTES = 8;
const STDERR = 2;

export class AttachDemuxer {
  readonly #header = Buffer.alloc(HEADER_BYTES);
  #headerBytes = 0;
  /** Payload bytes still to come for the current frame; 0 while reading a header. */
  #remaining = 0;
  #toStderr = false;

  constructor(
    private readonly onStdout: (payload: Buffer) => void,
    private readonly onStderr: (payload: Buffer) => void,
  ) {}

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.#remaining === 0) {
        const take = Math.min(HEADER_BYTES - this.#headerBytes, chunk.length - at);
        chunk.copy(this.#header, this.#headerBytes, at, at + take);
        this.#headerBytes += take;
        at += take;
        if (this.#headerBytes < HEADER_BYTES) return;
        this.#headerBytes = 0;
        // Type 0 (stdin echoed back) is treated as stdout, as Docker's own clients do.
        this.#toStderr = this.#header[0] === STDERR;
        this.#remaining = this.#header.readUInt32BE(4);
        continue;
      }
      const end = Math.min(chunk.length, at + this.#remaining);
      this.#remaining -= end - at;
      (this.#toStderr ? this.onStderr : this.onStdout)(chunk.subarray(at, end));
      at = end;
    }
  }
}

/**
 * Splits an attach/exec stream into stdout and stderr, both ended when the stream ends. Each keeps
 * to its reader's pace: while either holds more than its buffer, the engine's stream is paused, so
 * what the sandbox writes waits in the engine's pipe and then blocks the writer, never piling up
 * here (review, session 36: a sandbox wrote 3 GB into the relay's exec once the host had stopped
 * reading it, and the controller grew with it).
 */
export function demuxedStreams(stream: Readable): { stdout: PassThrough; stderr: PassThrough } {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const waiting = new Set<PassThrough>();
  const write = (target: PassThrough, payload: Buffer) => {
    if (target.destroyed || target.writableEnded) return;
    if (target.write(payload) || waiting.has(target)) return;
    waiting.add(target);
    stream.pause();
    target.once("drain", () => {
      waiting.delete(target);
      if (waiting.size === 0) stream.resume();
    });
  };
  const demuxer = new AttachDemuxer(
    (payload) => write(stdout, payload),
    (payload) => write(stderr, payload),
  );
  stream.on("data", (chunk: Buffer) => demuxer.push(chunk));
  const end = () => {
    stdout.end();
    stderr.end();
  };
  stream.on("end", end);
  stream.on("close", end);
  stream.on("error", end);
  return { stdout, stderr };
}
