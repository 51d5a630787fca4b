import { describe, expect, test } from "bun:test";
import { assertTargetAllowed, checkTargetUrlSyntax, isForbiddenAddress, TargetRefusedError, targetUrlSyntax } from "../../src/worker/target-guard.ts";

const allowed = [
  "8.8.8.8",
  "1.1.1.1",
  "93.184.216.34",
  "172.15.255.255",
  "172.32.0.1",
  "100.63.255.255",
  "100.128.0.0",
  "169.253.255.255",
  "169.255.0.0",
  "192.0.1.0",
  "192.167.255.255",
  "192.169.0.0",
  "198.17.255.255",
  "198.20.0.0",
  "223.255.255.255",
  "9.255.255.255",
  "11.0.0.0",
  "126.255.255.255",
  "128.0.0.0",
  "2606:4700::1111",
  "2001:4860:4860::8888",
  "2a00:1450:4001:80b::200e",
  "::ffff:8.8.8.8",
  "::ffff:808:808",
  "64:ff9b::8.8.8.8",
  "2002:808:808::1",
  "fbff:ffff::1",
  "192.0.1.255",
  "192.0.3.0",
  "198.51.99.255",
  "198.51.101.0",
  "203.0.112.255",
  "203.0.114.0",
  "2001:1::1",
  "2001:4860::1",
  "100:0:0:1::",
  "fe00::1",
];

const forbidden = [
  "0.0.0.0",
  "0.255.255.255",
  "10.0.0.1",
  "10.255.255.255",
  "100.64.0.0",
  "100.127.255.255",
  "127.0.0.1",
  "127.255.255.254",
  "169.254.0.1",
  "169.254.169.254",
  "172.16.0.1",
  "172.31.255.255",
  "192.0.0.1",
  "192.0.0.255",
  "192.168.0.1",
  "192.168.255.255",
  "198.18.0.1",
  "198.19.255.255",
  "224.0.0.1",
  "239.255.255.255",
  "240.0.0.1",
  "255.255.255.255",
  "::",
  "::1",
  "0:0:0:0:0:0:0:1",
  "fc00::1",
  "fd12:3456::1",
  "fd00:ec2::254",
  "fe80::1",
  "fe80::1%eth0",
  "febf:ffff::1",
  "ff02::1",
  "ff05::1:3",
  "::ffff:127.0.0.1",
  "::ffff:7f00:1",
  "::ffff:169.254.169.254",
  "::ffff:a9fe:a9fe",
  "::FFFF:10.0.0.1",
  "::127.0.0.1",
  "::ffff:0:127.0.0.1",
  "64:ff9b::127.0.0.1",
  "64:ff9b::a00:1",
  "64:ff9b:1::192.168.0.1",
  "2002:7f00:1::1",
  "2002:a9fe:a9fe::",
  // documentation ranges, Teredo, discard-only, site-local
  "192.0.2.1",
  "192.0.2.255",
  "198.51.100.7",
  "203.0.113.9",
  "2001::1",
  "2001:0:4136:e378:8000:63bf:3fff:fdd2",
  "2001:db8::1",
  "100::",
  "100::ffff:ffff:ffff:ffff",
  "fec0::1",
  "feff:ffff::1",
  // not IP addresses at all: the guard fails closed
  "",
  "localhost",
  "1.2.3",
  "[::1]",
  "999.1.1.1",
];

describe("isForbiddenAddress", () => {
  for (const ip of allowed) test(`allows ${ip}`, () => expect(isForbiddenAddress(ip)).toBe(false));
  for (const ip of forbidden) test(`forbids ${JSON.stringify(ip)}`, () => expect(isForbiddenAddress(ip)).toBe(true));
});

describe("checkTargetUrlSyntax", () => {
  test("accepts http and https", () => {
    expect(checkTargetUrlSyntax("https://example.com/hook?a=1")).toBeNull();
    expect(checkTargetUrlSyntax("http://example.com:8080/")).toBeNull();
  });
  test("refuses other schemes, missing hosts, credentials and junk", () => {
    expect(checkTargetUrlSyntax("ftp://example.com/")).toContain("http: or https:");
    expect(checkTargetUrlSyntax("file:///etc/passwd")).toContain("http: or https:");
    expect(checkTargetUrlSyntax("javascript:alert(1)")).toContain("http: or https:");
    expect(checkTargetUrlSyntax("https://user:pass@example.com/")).toContain("credentials");
    expect(checkTargetUrlSyntax("https://user@example.com/")).toContain("credentials");
    expect(checkTargetUrlSyntax("/relative")).toContain("valid absolute URL");
    expect(checkTargetUrlSyntax("not a url")).toContain("valid absolute URL");
  });
});

describe("targetUrlSyntax (checkTargetUrlSyntax remembered per URL)", () => {
  const urls = [
    "https://example.com/hook?a=1",
    "ftp://example.com/",
    "https://user:pass@example.com/",
    "not a url",
    // Past the cached length: checked each time, the same answers.
    `https://example.com/${"a".repeat(600)}`,
    `ftp://example.com/${"a".repeat(600)}`,
  ];
  test("gives checkTargetUrlSyntax's answer, the first time and again", () => {
    for (let round = 0; round < 2; round++) for (const u of urls) expect(targetUrlSyntax(u)).toBe(checkTargetUrlSyntax(u));
  });
});

async function refusal(p: Promise<void>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a refusal");
}

const noLookup = async (): Promise<string[]> => {
  throw new Error("lookup must not be called");
};

describe("assertTargetAllowed", () => {
  test("IP literals are checked without a lookup", async () => {
    const e = await refusal(assertTargetAllowed("http://127.0.0.1:8080/x", { allowPrivate: false, lookup: noLookup }));
    expect(e).toBeInstanceOf(TargetRefusedError);
    expect((e as TargetRefusedError).code).toBe("target_refused");
    // The address is for the operator's log; the message (seen by the tenant) names none.
    expect(e.message).toBe(
      "target url points to a private address (loopback, private, link-local or reserved); set SCHEDULER_ALLOW_PRIVATE_TARGETS=1 to allow it",
    );
    expect((e as TargetRefusedError).address).toBe("127.0.0.1");
    await assertTargetAllowed("https://8.8.8.8/", { allowPrivate: false, lookup: noLookup });
    await assertTargetAllowed("https://[2606:4700::1111]/", { allowPrivate: false, lookup: noLookup });
  });

  test("bracketed IPv6 literals and odd IPv4 spellings are refused", async () => {
    for (const url of [
      "http://[::1]/",
      "http://[::ffff:127.0.0.1]/",
      "http://[fd00:ec2::254]/",
      "http://2130706433/",
      "http://0x7f.1/",
      "http://127.1/",
      "http://0177.0.0.1/",
      "http://169.254.169.254/latest/meta-data/",
    ]) {
      const e = await refusal(assertTargetAllowed(url, { allowPrivate: false, lookup: noLookup }));
      expect(e).toBeInstanceOf(TargetRefusedError);
    }
  });

  test("localhost names and metadata.google.internal are refused without a lookup", async () => {
    for (const url of ["http://localhost/", "http://LOCALHOST./", "http://api.localhost:3000/", "http://metadata.google.internal/computeMetadata/v1/"]) {
      const e = await refusal(assertTargetAllowed(url, { allowPrivate: false, lookup: noLookup }));
      expect(e).toBeInstanceOf(TargetRefusedError);
    }
  });

  test("a name is refused when any of its addresses is forbidden", async () => {
    const lookup = async (host: string) => {
      expect(host).toBe("mixed.example.com");
      return ["93.184.216.34", "2606:4700::1111", "10.0.0.5"];
    };
    const e = await refusal(assertTargetAllowed("https://mixed.example.com/hook", { allowPrivate: false, lookup }));
    expect(e).toBeInstanceOf(TargetRefusedError);
    expect(e.message).not.toContain("10.0.0.5");
    expect((e as TargetRefusedError).address).toBe("10.0.0.5");
  });

  test("a name with only public addresses is allowed", async () => {
    const lookup = async () => ["93.184.216.34", "2606:4700::1111"];
    await assertTargetAllowed("https://public.example.com/hook", { allowPrivate: false, lookup });
  });

  test("a DNS failure is a plain error, not a refusal", async () => {
    const lookup = async () => {
      throw Object.assign(new Error("getaddrinfo ENOTFOUND gone.example.com"), { code: "ENOTFOUND" });
    };
    const e = await refusal(assertTargetAllowed("https://gone.example.com/", { allowPrivate: false, lookup }));
    expect(e).not.toBeInstanceOf(TargetRefusedError);
    expect(e.message).toStartWith("could not resolve host gone.example.com");
    const empty = await refusal(assertTargetAllowed("https://x.example.com/", { allowPrivate: false, lookup: async () => [] }));
    expect(empty).not.toBeInstanceOf(TargetRefusedError);
  });

  test("the default lookup turns a real resolver failure into a plain error", async () => {
    // .invalid never resolves (RFC 2606), so this exercises dns.lookup without any network.
    const dnsErr = await refusal(assertTargetAllowed("http://no-such-host.invalid/", { allowPrivate: false }));
    expect(dnsErr).not.toBeInstanceOf(TargetRefusedError);
    expect(dnsErr.message).toStartWith("could not resolve host no-such-host.invalid");
  });

  test("syntax problems are refusals", async () => {
    for (const url of ["ftp://example.com/", "https://u:p@example.com/", "nope"]) {
      const e = await refusal(assertTargetAllowed(url, { allowPrivate: true, lookup: noLookup }));
      expect(e).toBeInstanceOf(TargetRefusedError);
    }
  });

  test("allowPrivate lets private targets through without a lookup", async () => {
    await assertTargetAllowed("http://127.0.0.1:9/", { allowPrivate: true, lookup: noLookup });
    await assertTargetAllowed("http://localhost:9/", { allowPrivate: true, lookup: noLookup });
    await assertTargetAllowed("http://internal.example/", { allowPrivate: true, lookup: noLookup });
  });
});
