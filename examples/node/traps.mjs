// What proto-loader's default options do to tblimit.v1's messages, shown
// and checked: main.mjs's options are the cure for each. It needs no
// server: it encodes requests as a client would send them and answers as
// the server writes them (no field at its zero value), and decodes both.
//
//   node traps.mjs
//
// It exits 1 when a trap is not what README.md says: then the README is
// wrong, or proto-loader changed.
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";
import path from "node:path";
import protoLoader from "@grpc/proto-loader";

const proto = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../proto/tblimit/v1/tblimit.proto");
const load = (options) => protoLoader.loadSync(proto, options)["tblimit.v1.LimitService"];
const safe = load({ keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
const plain = load({});

let failed = false;
function show(option, ok, what) {
  console.log(`${option}: ${what}`);
  if (!ok) {
    console.error(`  not so: the README's row for ${option} is wrong`);
    failed = true;
  }
}

// keepCase: a request written with the .proto's names.
const pay = { resource: "usd-day", from: "alice", to: "shop", amount: "1250", request_id: "order-1234" };
const sent = (svc) => safe.Pay.requestDeserialize(svc.Pay.requestSerialize(pay)).request_id;
show("keepCase", sent(plain) === "" && sent(safe) === "order-1234",
  `without it, Pay's request_id reaches the server as ${JSON.stringify(sent(plain))}; with it, ${JSON.stringify(sent(safe))}`);

// A denial as the server writes it: allowed false and a zero reset_after
// are not on the wire as values (reset_after is there, empty). Without
// keepCase its fields are camelCase: resetAfter.
const denial = safe.Acquire.responseSerialize({
  decision: { reason: "REASON_LIMIT_EXCEEDED", limit: "9007199254740993", retry_after: { seconds: "30" }, reset_after: {} },
});
const p = plain.Acquire.responseDeserialize(denial).decision;
const s = safe.Acquire.responseDeserialize(denial).decision;
show("longs", typeof p.limit === "object" && "low" in p.limit && s.limit === "9007199254740993",
  `without it, a limit of 2^53+1 reads ${JSON.stringify(p.limit)}; with it, ${JSON.stringify(s.limit)}`);
show("enums", p.reason === 2 && s.reason === "REASON_LIMIT_EXCEEDED",
  `without it, a denial's reason reads ${JSON.stringify(p.reason)}; with it, ${JSON.stringify(s.reason)}`);
show("defaults",
  p.allowed === undefined && isDeepStrictEqual(p.resetAfter, {}) && s.allowed === false &&
    isDeepStrictEqual(s.reset_after, { seconds: "0", nanos: 0 }),
  `without it, a denial's allowed reads ${p.allowed} and a zero reset_after ${JSON.stringify(p.resetAfter)}; ` +
    `with it, ${s.allowed} and ${JSON.stringify(s.reset_after)}`);

// oneofs: the funds of a User and of Pay's answer are proto3 optional (a
// oneof of one): a User on a requests resource has none, nor has a Pay
// whose funds the server could not read.
const user = safe.GetUser.responseDeserialize(safe.GetUser.responseSerialize({ user: { key: "alice", limit: "5", funds: "0" } })).user;
const paid = safe.Pay.responseDeserialize(safe.Pay.responseSerialize({ decision: { allowed: true } }));
show("oneofs", user.funds === "0" && user._funds === "funds" && paid.funds === undefined && paid._funds === undefined,
  `with it, a user's funds of 0 read ${JSON.stringify(user.funds)} with _funds ${JSON.stringify(user._funds)}; ` +
    `a payment's funds left out read ${paid.funds} with _funds ${paid._funds}`);

if (failed) process.exitCode = 1;
