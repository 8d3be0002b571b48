// A payment service's use of tblimit.v1 from Node: provision a merchant
// while tblimit serve runs, decide, pay under request IDs (a retry moves
// money once), reserve and commit, and switch on errors by their reason.
//
//   TBLIMIT_ADDR=127.0.0.1:8081 TBLIMIT_TOKEN=... node main.mjs
//
// It exits 1 on any answer it did not expect, an error included.
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
  // denial says allowed: false and a zero duration reads {seconds: "0",
  // nanos: 0}, not {} (whose seconds are undefined: NaN in arithmetic).
  // A message field the server left unset is null.
  defaults: true,
  // oneofs: true: a oneof gets a field naming its member that is set. The
  // API's only oneofs are proto3 optional fields, the funds of a User (absent
  // on a requests resource) and of Pay's and Fund's answers (absent when the
  // server could not read them): _funds: "funds" when set. A present 0
  // reads "0", an absent one undefined, and defaults: true fills no default
  // in for it.
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

// fundsAfter is the funds a Pay or Fund answered, or, when the server could
// not read them (funds absent: the payment or fund stands all the same),
// what Funds reads now. An absent number is not 0.
async function fundsAfter(answer, resource, user) {
  if (answer._funds === "funds") return answer.funds;
  return (await call("Funds", { resource, user })).funds;
}

// whatToDo is what a payment service does about an error, by its reason
// (docs/api.md#error-reasons lists them): messages are for people and may
// change, reasons do not.
function whatToDo(err) {
  switch (reasonOf(err)) {
    case "UNAVAILABLE":
      return "send it again under the same request_id: it is made once";
    case "REQUEST_ID_REUSED":
      return "a bug: this request_id names another request";
    case "UNKNOWN_USER":
      return "add the user (AddUsers) before it pays or is paid";
    case "RESERVATION_ENDED":
    case "RESERVATION_EXPIRED":
      return "the authorization is over: authorize again";
    default:
      return "fail the order";
  }
}

// check throws when an answer is not what the run expects.
function check(ok, what) {
  if (!ok) throw new Error(what);
}

const seconds = (d) => Number(d.seconds) + d.nanos / 1e9;

async function main() {
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
  console.log(`funded ${payer}: ${await fundsAfter(funded, "usd-day", payer)}`);

  // 2. A decision: allowed, what remains, when to retry.
  const a = await call("Acquire", { resource: "api", user: payer });
  check(a.decision.allowed && a.decision.remaining === "4", `Acquire = ${JSON.stringify(a.decision)}`);
  console.log(`acquire: allowed ${a.decision.allowed}, remaining ${a.decision.remaining}, retry after ${seconds(a.decision.retry_after)}s`);
  // A denial is an answer, not an error: allowed false, the reason, and how
  // long until the same amount fits. Nothing was taken.
  const d = (await call("Acquire", { resource: "api", user: payer, amount: "5" })).decision;
  check(!d.allowed && d.reason === "REASON_LIMIT_EXCEEDED" && seconds(d.retry_after) > 0 && d.remaining === "4",
    `Acquire of 5 with 4 left = ${JSON.stringify(d)}, want a denial with a retry_after`);
  console.log(`acquire 5: allowed ${d.allowed} (${d.reason}), remaining ${d.remaining}, retry after ${seconds(d.retry_after)}s`);

  // 3. A payment under a request ID, sent twice as after a lost answer: the
  // money moves once, and both answers say what the payer holds after it.
  const pay = { resource: "usd-day", from: payer, to: merchant, amount: "12500", request_id: `order-${run}` };
  const first = await call("Pay", pay);
  const again = await call("Pay", pay);
  check(first.decision.allowed && again.decision.allowed, `Pay = ${JSON.stringify(first)}, again ${JSON.stringify(again)}`);
  const left = [await fundsAfter(first, "usd-day", payer), await fundsAfter(again, "usd-day", payer)];
  check(left[0] === "487500" && left[1] === "487500", `funds after the payment and its retry: ${left}`);
  const m = await call("GetUser", { resource: "usd-day", user: merchant });
  check(m.user.funds === "12500", `the merchant holds ${m.user.funds}, want 12500: paid once`);
  console.log(`paid 12500 once (sent twice): ${payer} holds ${left[1]}, ${merchant} ${m.user.funds}`);

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

  // 5. Errors by reason, not by message: the same request_id for another
  // amount, a payer the resource does not know, a second capture.
  for (const [method, request, reason] of [
    ["Pay", { ...pay, amount: "13000" }, "REQUEST_ID_REUSED"],
    ["Pay", { ...pay, from: `nobody-${run}`, request_id: `order-x-${run}` }, "UNKNOWN_USER"],
    ["Commit", { reservation_id: auth.reservation_id, amount: "100" }, "RESERVATION_ENDED"],
  ]) {
    const err = await refused(method, request, reason);
    console.log(`${method} refused: ${grpc.status[err.code]} ${reason}: ${whatToDo(err)}`);
  }
  console.log("ok");
}

try {
  await main();
} catch (err) {
  // An answer the run did not expect, or an error it did not ask for: say
  // which, with the error's reason when it has one, and exit 1.
  const reason = err.metadata ? ` (reason ${reasonOf(err) || "none"})` : "";
  console.error(`unexpected: ${err.message}${reason}`);
  process.exitCode = 1;
} finally {
  client.close();
}
