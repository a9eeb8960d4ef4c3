/* placeholder */ typedef int placeholder_pending;
