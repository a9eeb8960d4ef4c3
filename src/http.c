/* placeholder */ typedef int placeholder_http;
