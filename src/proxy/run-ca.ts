// The per-run certificate authority that lets the egress proxy terminate TLS for the hosts of a
// run's secrets. Made when the run starts, held in this process's memory only (never written
// anywhere, least of all into the sandbox), gone when the run ends; its certificate is the only
// part the sandbox sees, as one more trusted root.
//
// Built on Node's crypto (EC P-256 keys, ECDSA-SHA256 signatures, SubjectPublicKeyInfo export)
// plus the small DER writer in der.ts, rather than an npm dependency: the candidates are either
// RSA-only or large (node-forge), or pull in a WebCrypto/ASN.1-schema stack (@peculiar/x509,
// pkijs); a run needs two key pairs and one certificate per secret host, which is about 150 lines
// of code anyone can read. P-256 key generation and signing take about a millisecond each.
//
// The CA is constrained: pathLen 0 (it signs leaves only) and nameConstraints permitting only the
// secrets' host names, so even a stolen CA could not vouch for any other name (clients built on
// OpenSSL, GnuTLS and Node enforce name constraints).
import crypto from "node:crypto";
import * as der from "./der.js";

export interface RunCa {
  /** The CA certificate, PEM: what the sandbox trusts. */
  readonly certificatePem: string;
  /** A certificate for one host name (subjectAltName dNSName), signed by the CA, for `leafKeyPem`. */
  issue(host: string): string;
  /** The one leaf key every issued certificate certifies (PEM, PKCS#8). Stays on the host. */
  readonly leafKeyPem: string;
}

interface RunCaOptions {
  /** Shown in the CA's subject, e.g. the run id. */
  label: string;
  /** The only names the CA may vouch for (its nameConstraints). */
  hosts: readonly string[];
  /** How long its certificates are valid, from `now`. */
  validForMs: number;
  now?: Date;
}

const OID = {
  ecPublicKey: "1.2.840.10045.2.1",
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  commonName: "2.5.4.3",
  organization: "2.5.4.10",
  subjectKeyIdentifier: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  nameConstraints: "2.5.29.30",
  authorityKeyIdentifier: "2.5.29.35",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1",
};

/** Clock skew allowance: a certificate is valid from a little before the run started. */
const BACKDATE_MS = 60 * 60 * 1000;

export function createRunCa(options: RunCaOptions): RunCa {
  const now = options.now ?? new Date();
  const notBefore = new Date(now.getTime() - BACKDATE_MS);
  const notAfter = new Date(now.getTime() + options.validForMs);
  const caKeys = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" });
  const leafKeys = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" });
  const caSpki = caKeys.publicKey.export({ type: "spki", format: "der" });
  const leafSpki = leafKeys.publicKey.export({ type: "spki", format: "der" });
  const caKeyId = keyIdentifier(caSpki);
  const caName = distinguishedName(`sandbox-run CA for run ${options.label}`);

  const caCertificate = signCertificate(caKeys.privateKey, {
    issuer: caName,
    subject: caName,
    notBefore,
    notAfter,
    spki: caSpki,
    extensions: [
      extension(OID.basicConstraints, true, der.sequence(der.boolean(true), der.smallInteger(0))),
      extension(OID.keyUsage, true, namedBits(0x06)), // keyCertSign, cRLSign
      extension(OID.subjectKeyIdentifier, false, der.octetString(caKeyId)),
      extension(
        OID.nameConstraints,
        true,
        der.sequence(
          der.implicitConstructed(
            0,
            ...options.hosts.map((host) => der.sequence(der.implicitPrimitive(2, Buffer.from(host, "ascii")))),
          ),
        ),
      ),
    ],
  });

  return {
    certificatePem: pem(caCertificate),
    leafKeyPem: leafKeys.privateKey.export({ type: "pkcs8", format: "pem" }) as string,
    issue: (host) =>
      pem(
        signCertificate(caKeys.privateKey, {
          issuer: caName,
          subject: distinguishedName(host),
          notBefore,
          notAfter,
          spki: leafSpki,
          extensions: [
            extension(OID.basicConstraints, true, der.sequence()),
            extension(OID.keyUsage, true, namedBits(0x80)), // digitalSignature
            extension(OID.extKeyUsage, false, der.sequence(der.objectIdentifier(OID.serverAuth))),
            extension(OID.subjectAltName, false, der.sequence(der.implicitPrimitive(2, Buffer.from(host, "ascii")))),
            extension(OID.subjectKeyIdentifier, false, der.octetString(keyIdentifier(leafSpki))),
            extension(OID.authorityKeyIdentifier, false, der.sequence(der.implicitPrimitive(0, caKeyId))),
          ],
        }),
      ),
  };
}

interface CertificateFields {
  issuer: Buffer;
  subject: Buffer;
  notBefore: Date;
  notAfter: Date;
  spki: Buffer;
  extensions: Buffer[];
}

function signCertificate(signer: crypto.KeyObject, fields: CertificateFields): Buffer {
  const algorithm = der.sequence(der.objectIdentifier(OID.ecdsaWithSha256));
  const serial = crypto.randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x01; // positive and non-zero, as RFC 5280 asks
  const tbs = der.sequence(
    der.explicit(0, der.smallInteger(2)), // v3
    der.unsignedInteger(serial),
    algorithm,
    fields.issuer,
    der.sequence(der.time(fields.notBefore), der.time(fields.notAfter)),
    fields.subject,
    fields.spki,
    der.explicit(3, der.sequence(...fields.extensions)),
  );
  const signature = crypto.sign("sha256", tbs, signer); // DER ECDSA-Sig-Value
  return der.sequence(tbs, algorithm, der.bitString(signature));
}

function distinguishedName(commonName: string): Buffer {
  return der.sequence(
    der.set(der.sequence(der.objectIdentifier(OID.organization), der.utf8String("sandbox-run"))),
    der.set(der.sequence(der.objectIdentifier(OID.commonName), der.utf8String(commonName.slice(0, 64)))),
  );
}

function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  return der.sequence(der.objectIdentifier(oid), ...(critical ? [der.boolean(true)] : []), der.octetString(value));
}

/** A KeyUsage-style BIT STRING of one byte, with its trailing zero bits declared unused (DER). */
function namedBits(byte: number): Buffer {
  let unused = 0;
  while (unused < 7 && !(byte & (1 << unused))) unused++;
  return Buffer.from([0x03, 0x02, unused, byte]);
}

function keyIdentifier(spki: Buffer): Buffer {
  return crypto.createHash("sha1").update(spki).digest();
}

function pem(certificate: Buffer): string {
  const lines = certificate.toString("base64").match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join("\n")}\n-----END CERTIFICATE-----\n`;
}
