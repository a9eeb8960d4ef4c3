/* placeholder */ typedef int placeholder_jsonrpc;
