/* placeholder */ typedef int placeholder_stream;
