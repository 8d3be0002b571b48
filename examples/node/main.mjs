// A payment service's use of tblimit.v1 from Node: provision a merchant
// while tblimit serve runs, decide, pay under request IDs (a retry moves
// money once), reserve and commit, and switch on errors by their reason.
//
//   TBLIMIT_ADDR=127.0.0.1:8081 TBLIMIT_TOKEN=... node main.mjs
//
// It exits 1 on any answer it did not expect.
import { fileURLToPath } from "node:url";
import path from "node:path";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const addr = process.env.TBLIMIT_ADDR ?? "127.0.0.1:8081";
const token = process.env.TBLIMIT_TOKEN ?? "";
// Names of this run's users and requests: run it again, and it pays anew.
const run = process.env.TBLIMIT_RUN ?? Date.now().toString(36);

const definition = protoLoader.loadSync(path.join(here, "../../proto/tblimit/v1/tblimit.proto"), {
  // keepCase: fields keep the .proto's names (request_id). Without it,
  // proto-loader reads requestId and silently drops request_id: a payment
  // sent again after a lost answer is then a second payment.
  keepCase: true,
  // longs: String: uint64 fields (amounts, limits, funds) as decimal
  // strings, exact past 2^53; without it they come back as {low, high}.
  longs: String,
  // enums: String: "REASON_LIMIT_EXCEEDED", not 2.
  enums: String,
  // defaults: true: every field is present, false and "0" included, so a
  // denial says allowed: false and an unset duration reads 0 seconds,
  // not {} or undefined.
  defaults: true,
  oneofs: true,
});
const v1 = grpc.loadPackageDefinition(definition).tblimit.v1;
const client = new v1.LimitService(addr, grpc.credentials.createInsecure());

// Errors carry a google.rpc.Status with a google.rpc.ErrorInfo in the
// grpc-status-details-bin trailer: its reason is what to switch on.
const rpcTypes = protobuf.loadSync(path.join(here, "proto/google/rpc/status.proto"));
const Status = rpcTypes.lookupType("google.rpc.Status");
const ErrorInfo = rpcTypes.lookupType("google.rpc.ErrorInfo");

function reasonOf(err) {
  const [bin] = err.metadata?.get("grpc-status-details-bin") ?? [];
  if (!bin) return "";
  for (const any of Status.decode(bin).details) {
    if (any.type_url.endsWith("/google.rpc.ErrorInfo")) return ErrorInfo.decode(any.value).reason;
  }
  return "";
}

// call makes one call with the bearer token and resolves to its answer.
function call(method, request) {
  const md = new grpc.Metadata();
  if (token) md.set("authorization", `Bearer ${token}`);
  const deadline = new Date(Date.now() + 30_000);
  return new Promise((resolve, reject) =>
    client[method](request, md, { deadline }, (err, resp) => (err ? reject(err) : resolve(resp))),
  );
}

// refused makes a call that must fail with reason, and returns the error.
async function refused(method, request, reason) {
  try {
    await call(method, request);
  } catch (err) {
    const got = reasonOf(err);
    check(got === reason, `${method} failed with reason ${got} (${err.details}), want ${reason}`);
    return err;
  }
  check(false, `${method} succeeded, want an error with reason ${reason}`);
}

function check(ok, what) {
  if (!ok) {
    console.error(`unexpected: ${what}`);
    process.exit(1);
  }
}

const seconds = (d) => Number(d.seconds) + d.nanos / 1e9;

// 1. Provisioning (the admin permission): a money limit of 1,000.00 a day
// in USD cents, and 5 requests a minute; a payer and a new merchant.
for (const resource of [
  { name: "usd-day", kind: "KIND_MONEY", ledger: 9001, currency: 9840, window: { seconds: 86400 }, default_limit: "100000" },
  { name: "api", kind: "KIND_REQUESTS", ledger: 9002, window: { seconds: 60 }, default_limit: "5", lazy: true },
]) {
  const r = await call("CreateResource", { resource });
  console.log(`resource ${r.resource.name}: ${r.created ? "created" : "exists"}`);
}
const payer = `alice-${run}`;
const merchant = `merchant-${run}`;
await call("AddUsers", { resource: "usd-day", users: [{ key: payer }, { key: merchant }] });
const funded = await call("Fund", { resource: "usd-day", user: payer, amount: "500000", request_id: `fund-${run}` });
console.log(`funded ${payer}: ${funded.funds}`);

// 2. A decision: allowed, what remains, when to retry.
const a = await call("Acquire", { resource: "api", user: payer });
check(a.decision.allowed && a.decision.remaining === "4", `Acquire = ${JSON.stringify(a.decision)}`);
console.log(`acquire: allowed ${a.decision.allowed}, remaining ${a.decision.remaining}, retry after ${seconds(a.decision.retry_after)}s`);

// 3. A payment under a request ID, sent twice as after a lost answer: the
// money moves once, and both answers say what the payer holds after it.
const pay = { resource: "usd-day", from: payer, to: merchant, amount: "12500", request_id: `order-${run}` };
const first = await call("Pay", pay);
const again = await call("Pay", pay);
check(first.decision.allowed && again.decision.allowed, `Pay = ${JSON.stringify(first)}, again ${JSON.stringify(again)}`);
check(first.funds === "487500" && again.funds === "487500", `funds after the payment and its retry: ${first.funds}, ${again.funds}`);
const m = await call("GetUser", { resource: "usd-day", user: merchant });
check(m.user.funds === "12500", `the merchant holds ${m.user.funds}, want 12500: paid once`);
console.log(`paid 12500 once (sent twice): ${payer} holds ${again.funds}, ${merchant} ${m.user.funds}`);

// 4. Reservations: hold the most a call may use, commit what it used.
const rv = await call("Reserve", { resource: "api", user: payer, amount: "3", request_id: `call-${run}` });
check(rv.decision.allowed && rv.reservation_id !== "", `Reserve = ${JSON.stringify(rv)}`);
await call("Commit", { reservation_id: rv.reservation_id, amount: "1" });
const peek = await call("Peek", { resource: "api", user: payer });
check(peek.decision.remaining === "3", `after committing 1 of 3: ${peek.decision.remaining} remain, want 3`);
console.log(`reserved 3, committed 1: ${peek.decision.remaining} remain`);

// An authorization: hold the payer's money and limit, capture part of it.
const auth = await call("Reserve", {
  resource: "usd-day", user: payer, payee: merchant, amount: "9000", request_id: `auth-${run}`,
});
check(auth.decision.allowed, `authorization = ${JSON.stringify(auth)}`);
await call("Commit", { reservation_id: auth.reservation_id, amount: "7450" });
const after = await call("GetUser", { resource: "usd-day", user: merchant });
check(after.user.funds === "19950", `the merchant holds ${after.user.funds} after a capture of 7450, want 19950`);
console.log(`authorized 9000, captured 7450: ${merchant} holds ${after.user.funds}`);

// 5. Errors by reason, not by message.
await refused("Pay", { ...pay, amount: "13000" }, "REQUEST_ID_REUSED");
await refused("Pay", { ...pay, from: `nobody-${run}`, request_id: `order-x-${run}` }, "UNKNOWN_USER");
const err = await refused("Commit", { reservation_id: auth.reservation_id, amount: "100" }, "RESERVATION_ENDED");
console.log(`errors switched on by reason: REQUEST_ID_REUSED, UNKNOWN_USER, RESERVATION_ENDED (${err.code})`);
client.close();
console.log("ok");
