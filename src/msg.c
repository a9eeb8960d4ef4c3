/* placeholder */ typedef int placeholder_msg;
