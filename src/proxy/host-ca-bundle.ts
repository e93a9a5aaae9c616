// The host CA bundle a policy with trustHostCaBundle hands to the sandbox. Where TLS is
// inspected on the way out (corporate proxies, these CI machines), HTTPS from the sandbox only
// verifies against the inspecting CA, which the host trusts through this one file. We mount
// exactly that file, read-only, never the directory around it.
import fs from "node:fs";
import { usageError } from "../errors.js";
import { HOST_CA_BUNDLE } from "../sandbox-contract.js";

/** The canonical path of the host's CA bundle; a usage error when it is missing. */
export function hostCaBundleFile(file: string = HOST_CA_BUNDLE): string {
  let real: string;
  try {
    real = fs.realpathSync(file);
  } catch {
    throw usageError(
      `The policy sets trustHostCaBundle, but the host has no CA bundle at ${file}.`,
      "Install the ca-certificates package on the host (update-ca-certificates builds the bundle), or set trustHostCaBundle to false.",
    );
  }
  if (!fs.statSync(real).isFile()) {
    throw usageError(
      `The host CA bundle ${file} is not a file.`,
      "Point it at the PEM bundle update-ca-certificates builds, or set trustHostCaBundle to false.",
    );
  }
  return real;
}
