import dgram from "node:dgram";

/**
 * A DNS server on loopback UDP that the test controls: every A query for any name gets the
 * next address of `answers` (round robin) with TTL 0; AAAA queries get no records. Enough of
 * RFC 1035 for c-ares (node:dns Resolver) to accept the answers.
 */
export interface TestDns {
  /** "127.0.0.1:PORT", for SCHEDULER_DNS_SERVERS. */
  server: string;
  /** Each A query answered, in order: the name and the address given. */
  answered: { name: string; address: string }[];
  stop(): void;
}

export async function startTestDns(answers: (n: number) => string): Promise<TestDns> {
  const sock = dgram.createSocket("udp4");
  const answered: { name: string; address: string }[] = [];
  sock.on("message", (msg, rinfo) => {
    if (msg.length < 17) return;
    let off = 12;
    const labels: string[] = [];
    while (off < msg.length && msg[off] !== 0) {
      const len = msg[off]!;
      labels.push(msg.subarray(off + 1, off + 1 + len).toString("latin1"));
      off += len + 1;
    }
    const qtype = msg.readUInt16BE(off + 1);
    const question = msg.subarray(12, off + 5);
    const header = Buffer.alloc(12);
    msg.copy(header, 0, 0, 2); // the query's id
    header.writeUInt16BE(0x8180, 2); // a response, recursion desired and available, NOERROR
    header.writeUInt16BE(1, 4);
    let answer = Buffer.alloc(0);
    if (qtype === 1) {
      const address = answers(answered.length);
      answered.push({ name: labels.join("."), address });
      // Name pointer to the question, type A, class IN, TTL 0, 4 bytes of address.
      answer = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, ...address.split(".").map(Number)]);
      header.writeUInt16BE(1, 6);
    }
    sock.send(Buffer.concat([header, question, answer]), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => sock.bind(0, "127.0.0.1", () => resolve()));
  const { port } = sock.address();
  return { server: `127.0.0.1:${port}`, answered, stop: () => sock.close() };
}
