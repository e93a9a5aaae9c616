// Waits for a container to exit, and fails when the connection to the engine does. dockerode's
// wait() hangs forever when the link breaks after the engine sent the response's headers (Docker
// sends them at once and the body at exit): docker-modem listens for neither the response's
// 'error' nor a 'close' before its end. On an engine on another machine that is a run that never
// ends; here the response is read to its end or the wait fails.
import type { IncomingMessage } from "node:http";
import type Docker from "dockerode";

/** Bodies of a wait response are one small JSON object; anything longer is not one. */
const MAX_BODY = 64 * 1024;

export async function waitForExit(container: Docker.Container, signal?: AbortSignal): Promise<number> {
  const modem = container.modem as unknown as {
    dial(options: object, callback: (error: unknown, response: IncomingMessage) => void): void;
  };
  const response = await new Promise<IncomingMessage>((resolve, reject) =>
    modem.dial(
      {
        path: `/containers/${container.id}/wait?`,
        method: "POST",
        options: {},
        isStream: true,
        abortSignal: signal,
        statusCodes: { 200: true, 404: "no such container", 500: "server error" },
      },
      (error, res) => (error ? reject(error) : resolve(res)),
    ),
  );
  const body = await new Promise<string>((resolve, reject) => {
    let text = "";
    const onAbort = () => {
      response.destroy();
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    const settle = (error?: unknown) => {
      signal?.removeEventListener("abort", onAbort);
      if (error) reject(error);
      else resolve(text);
    };
    response.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      if (text.length > MAX_BODY) response.destroy(new Error("the engine's wait response is too long"));
    });
    response.on("end", () => settle());
    response.on("error", (error) => settle(error));
    response.on("close", () => {
      if (!response.complete) settle(new Error("the connection to the engine closed before the container exited"));
    });
  });
  const result = JSON.parse(body) as { StatusCode?: unknown; Error?: { Message?: string } | null };
  if (typeof result.StatusCode !== "number")
    throw new Error(`the engine's wait answer has no exit code: ${body.slice(0, 200)}`);
  return result.StatusCode;
}
