import { httpSender } from "../../src/bench/http-sender.js";
import { runLoad } from "../../src/bench/loadgen.js";
const s = httpSender("http://127.0.0.1:18700/inference", Buffer.from('{"x": 2}'), { "content-type": "application/json" }, 64);
await runLoad(s.send, 64, 1);
const r = await runLoad(s.send, 64, 4);
console.log(JSON.stringify(r));
s.close();
