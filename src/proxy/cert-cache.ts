// One certificate per secret host, issued by the run's CA on first use and kept for the run: a
// git clone opens several connections to one host, and signing once is enough.
import type { RunCa } from "./run-ca.js";

export interface HostCertificate {
  /** The leaf key (PEM). */
  key: string;
  /** The host's certificate followed by the CA's (PEM chain). */
  cert: string;
}

export class HostCertificates {
  private readonly issued = new Map<string, HostCertificate>();

  constructor(private readonly ca: RunCa) {}

  for(host: string): HostCertificate {
    let certificate = this.issued.get(host);
    if (!certificate) {
      certificate = { key: this.ca.leafKeyPem, cert: `${this.ca.issue(host)}${this.ca.certificatePem}` };
      this.issued.set(host, certificate);
    }
    return certificate;
  }
}
