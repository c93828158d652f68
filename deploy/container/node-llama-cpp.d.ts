// The image has no node-llama-cpp (an optional peer of 680 MB): this stand-in of the types
// shoal/llama names lets it compile; using it there fails with "Cannot find package 'node-llama-cpp'".
declare module "node-llama-cpp" {
  export type ChatHistoryItem = any;
  export type ChatWrapper = any;
  export type LlamaContext = any;
  export type LlamaContextSequence = any;
  export type LlamaModel = any;
  export type SequenceEvaluateOutput<T = any> = any;
  export type Token = any;
  export type TokenBias = any;
  export const TokenBias: any;
  export const getLlama: any;
  export const LlamaLogLevel: any;
  export const resolveChatWrapper: any;
  const lib: any;
  export default lib;
}
